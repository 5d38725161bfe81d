//! The orchestrator: session actors, workflow execution, event bus.
