//! What the mock agent offers: modes, models, config options and slash commands, as ACP JSON.

use serde_json::{Value, json};

/// `(id, name, description)` of each session mode; the first is the default.
pub const MODES: [(&str, &str, &str); 2] = [
    ("default", "Default", "Ask before making changes"),
    ("plan", "Plan", "Plan only, change nothing"),
];

/// `(id, name)` of each model; the first is the default.
pub const MODELS: [(&str, &str); 2] = [("mock-fast", "Mock Fast"), ("mock-smart", "Mock Smart")];

/// `(id, name)` of each thought level; the second is the default.
pub const THOUGHT_LEVELS: [(&str, &str); 3] =
    [("low", "Low"), ("medium", "Medium"), ("high", "High")];

/// The config option ids, in the order they are listed.
pub const CONFIG_IDS: [&str; 3] = ["mode", "model", "thought_level"];

/// The selections of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Current mode id.
    pub mode: String,
    /// Current model id.
    pub model: String,
    /// Current thought level id.
    pub thought_level: String,
}

impl Default for Selection {
    fn default() -> Self {
        Selection {
            mode: MODES[0].0.to_owned(),
            model: MODELS[0].0.to_owned(),
            thought_level: THOUGHT_LEVELS[1].0.to_owned(),
        }
    }
}

/// Why a selection change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    /// No such config option.
    #[error("unknown config option {0}")]
    UnknownOption(String),
    /// The value is not one of the option's values.
    #[error("unknown value {value} for {option}")]
    UnknownValue {
        /// The option (`mode`, `model`, `thought_level`).
        option: String,
        /// The value given.
        value: String,
    },
}

impl Selection {
    /// Sets config option `option` to `value` if both exist.
    pub fn set(&mut self, option: &str, value: &str) -> Result<(), SelectionError> {
        let (known, slot) = match option {
            "mode" => (MODES.iter().any(|m| m.0 == value), &mut self.mode),
            "model" => (MODELS.iter().any(|m| m.0 == value), &mut self.model),
            "thought_level" => {
                (THOUGHT_LEVELS.iter().any(|m| m.0 == value), &mut self.thought_level)
            }
            other => return Err(SelectionError::UnknownOption(other.to_owned())),
        };
        if !known {
            return Err(SelectionError::UnknownValue {
                option: option.to_owned(),
                value: value.to_owned(),
            });
        }
        value.clone_into(slot);
        Ok(())
    }

    /// `modes` of a `session/new` / `session/load` answer.
    pub fn modes_json(&self) -> Value {
        let available: Vec<Value> = MODES
            .iter()
            .map(|(id, name, description)| json!({"id": id, "name": name, "description": description}))
            .collect();
        json!({ "currentModeId": self.mode, "availableModes": available })
    }

    /// `models` (legacy, for `session/set_model` clients).
    pub fn models_json(&self) -> Value {
        let available: Vec<Value> =
            MODELS.iter().map(|(id, name)| json!({"modelId": id, "name": name})).collect();
        json!({ "currentModelId": self.model, "availableModels": available })
    }

    /// The full `configOptions` list.
    pub fn config_options_json(&self) -> Value {
        let select = |id: &str, name: &str, category: &str, current: &str, values: Vec<Value>| {
            json!({
                "id": id,
                "name": name,
                "category": category,
                "type": "select",
                "currentValue": current,
                "options": values,
            })
        };
        let values = |table: &[(&str, &str)]| -> Vec<Value> {
            table.iter().map(|(value, name)| json!({"value": value, "name": name})).collect()
        };
        let modes: Vec<(&str, &str)> = MODES.iter().map(|(id, name, _)| (*id, *name)).collect();
        json!([
            select("mode", "Mode", "mode", &self.mode, values(&modes)),
            select("model", "Model", "model", &self.model, values(&MODELS)),
            select(
                "thought_level",
                "Thinking",
                "thought_level",
                &self.thought_level,
                values(&THOUGHT_LEVELS)
            ),
        ])
    }
}

/// The `available_commands_update` sent after a conversation opens.
pub fn available_commands_update() -> Value {
    json!({
        "sessionUpdate": "available_commands_update",
        "availableCommands": [
            {"name": "echo", "description": "Echo the first line back", "input": {"hint": "text"}},
            {"name": "script", "description": "Run a #!mock script", "input": {"hint": "directives"}},
        ],
    })
}

/// A `current_mode_update` for `mode`.
pub fn current_mode_update(mode: &str) -> Value {
    json!({ "sessionUpdate": "current_mode_update", "currentModeId": mode })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_accepts_known_values_and_refuses_others() {
        let mut selection = Selection::default();
        selection.set("mode", "plan").unwrap();
        selection.set("model", "mock-smart").unwrap();
        selection.set("thought_level", "high").unwrap();
        assert_eq!(
            selection,
            Selection {
                mode: "plan".into(),
                model: "mock-smart".into(),
                thought_level: "high".into()
            }
        );
        assert_eq!(
            selection.set("mode", "yolo"),
            Err(SelectionError::UnknownValue { option: "mode".into(), value: "yolo".into() })
        );
        assert_eq!(
            selection.set("color", "red"),
            Err(SelectionError::UnknownOption("color".into()))
        );
    }

    #[test]
    fn config_options_list_every_option_with_its_current_value() {
        let options = Selection::default().config_options_json();
        let ids: Vec<&str> =
            options.as_array().unwrap().iter().map(|o| o["id"].as_str().unwrap()).collect();
        assert_eq!(ids, CONFIG_IDS);
        assert_eq!(options[1]["currentValue"], "mock-fast");
        assert_eq!(options[1]["category"], "model");
    }
}
