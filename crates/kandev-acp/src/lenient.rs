//! Helpers for parsing agent JSON leniently: `null` as default, open string enums.

use serde::{Deserialize, Deserializer};

/// Deserializes `null` (or a missing field, with `#[serde(default)]`) as `T::default()`.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Declares a string enum that keeps values it does not know in an `Other(String)` variant,
/// so a newer agent never makes parsing fail.
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident = $wire:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$variant_meta])* $variant, )*
            /// A value this crate does not know, kept as the agent sent it.
            Other(String),
        }

        impl $name {
            /// The value as it appears on the wire.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $wire, )*
                    $name::Other(value) => value,
                }
            }

            /// Parses a wire value; unknown values become `Other`.
            pub fn from_wire(value: &str) -> Self {
                match value {
                    $( $wire => $name::$variant, )*
                    other => $name::Other(other.to_owned()),
                }
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = String::deserialize(deserializer)?;
                Ok($name::from_wire(&value))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use open_enum;

#[cfg(test)]
mod tests {
    use super::*;

    open_enum! {
        /// A test enum.
        pub enum Colour {
            /// Red.
            Red = "red",
        }
    }

    #[derive(Deserialize)]
    struct WithList {
        #[serde(default, deserialize_with = "null_as_default")]
        items: Vec<u32>,
    }

    #[test]
    fn open_enum_keeps_unknown_values() {
        let known: Colour = serde_json::from_str("\"red\"").unwrap();
        let unknown: Colour = serde_json::from_str("\"mauve\"").unwrap();
        assert_eq!(known, Colour::Red);
        assert_eq!(unknown, Colour::Other("mauve".into()));
        assert_eq!(unknown.as_str(), "mauve");
    }

    #[test]
    fn null_and_missing_become_default() {
        let null: WithList = serde_json::from_str(r#"{"items": null}"#).unwrap();
        let missing: WithList = serde_json::from_str("{}").unwrap();
        assert!(null.items.is_empty());
        assert!(missing.items.is_empty());
    }
}
