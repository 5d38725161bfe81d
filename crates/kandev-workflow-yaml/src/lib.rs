//! The portable workflow YAML format: parse, validate, export, and the built-in templates.
