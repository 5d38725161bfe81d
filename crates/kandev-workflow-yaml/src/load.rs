//! Reading YAML text into plain values within [`Limits`]: the size of the text, the size it
//! expands to through aliases, the number of aliases, the nesting depth and the time taken.
//!
//! Built on `saphyr-parser`'s event stream so that every limit is checked while reading,
//! before the value that would break it exists: an alias is counted at the expanded size of
//! the node it repeats before that node is copied, nesting stops at the first level too deep,
//! and the clock is read between events. What this cannot see: the time of one event. The
//! scanner looks ahead at most to the end of the enclosing flow collection, and keeps at most
//! 255 flow levels (its own limit), so one event costs at most a pass over the (size-limited)
//! text times 256; the caller bounds the wall time again (the server parses off its async
//! workers, under a timeout).
//!
//! Scalars follow the YAML 1.2 core schema: quoted and block scalars are strings; plain ones
//! are null (`~`, `null`, empty), booleans (`true`, `false`), integers (decimal, `0x`, `0o`),
//! floats (`1.5`, `1e3`, `.inf`, `.nan`) or strings. Core-schema tags (`!!str`, ...) are
//! honoured; other tags, complex mapping keys, duplicate keys and several documents are
//! refused.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::{Duration, Instant};

use kandev_domain::validate::size;
use saphyr_parser::{Event, Parser, ScalarStyle, Span, Tag};

/// Bounds on one document. [`Limits::DEFAULT`] is what [`crate::import`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes of YAML text.
    pub max_bytes: usize,
    /// Most bytes the document expands to when every alias is replaced by a copy of its
    /// anchor's node, counted as the bytes of every scalar (at least 1) plus 1 per
    /// collection. A document without aliases expands to about its own size, so the default
    /// equals `max_bytes`: aliases cannot make a document bigger than one written out.
    pub max_expanded_bytes: usize,
    /// Most aliases (`*name`).
    pub max_aliases: usize,
    /// Deepest nesting of collections; the document itself is level 1.
    pub max_depth: usize,
    /// Longest time reading may take.
    pub max_time: Duration,
}

impl Limits {
    /// 256 KiB of text expanding to at most 256 KiB, 1,000 aliases, 32 levels, 2 seconds.
    /// A workflow document nests 9 levels deep (document, workflows, workflow, steps, step,
    /// events, trigger, action, value), exports never use aliases, and the built-in
    /// templates are 1 to 3 KiB. The size bounds memory too: the scanner may buffer every
    /// token of a flow collection before its first event (about 80 bytes of memory per byte
    /// of a flow mapping), so 256 KiB of text costs at most about 20 MiB while it is read.
    pub const DEFAULT: Limits = Limits {
        max_bytes: 256 * 1024,
        max_expanded_bytes: 256 * 1024,
        max_aliases: 1000,
        max_depth: 32,
        max_time: Duration::from_secs(2),
    };
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Why a document could not be read: a limit (named, so the user knows which), or a syntax
/// problem with its location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoadError {
    pub message: String,
}

impl LoadError {
    fn at(span: &Span, what: impl fmt::Display) -> Self {
        let mark = span.start;
        Self {
            message: format!(
                "invalid yaml: {what} at line {} column {}",
                mark.line(),
                mark.col() + 1
            ),
        }
    }

    fn limit(message: String) -> Self {
        Self { message }
    }
}

/// A YAML value. Mappings keep their entries in document order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    String(String),
    Seq(Vec<Value>),
    Map(Mapping),
}

/// Entries of a mapping, in document order, keys unique.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Mapping {
    entries: Vec<(Value, Value)>,
}

impl Mapping {
    /// The value of the string key `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v)
    }

    pub fn keys(&self) -> impl Iterator<Item = &Value> {
        self.entries.iter().map(|(k, _)| k)
    }
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Int(n) => u64::try_from(*n).ok(),
            _ => None,
        }
    }

    pub fn as_mapping(&self) -> Option<&Mapping> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    pub fn as_sequence(&self) -> Option<&[Value]> {
        match self {
            Value::Seq(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The value of the string key `key` of a mapping; `None` for anything else.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_mapping().and_then(|m| m.get(key))
    }

    /// A number as written in messages (`2`, `1.5`); `None` for anything else.
    pub fn number(&self) -> Option<String> {
        match self {
            Value::Int(n) => Some(n.to_string()),
            Value::Float(f) => Some(f.to_string()),
            _ => None,
        }
    }
}

/// A collection being read.
struct Frame {
    kind: FrameKind,
    anchor: usize,
    /// `expanded` when the collection started, to learn its own expanded size at its end.
    expanded_at_start: usize,
}

enum FrameKind {
    Seq(Vec<Value>),
    Map {
        mapping: Mapping,
        /// The key read, waiting for its value.
        key: Option<Value>,
        seen: HashSet<String>,
    },
}

/// A completed anchored node and its expanded size.
struct Anchored {
    value: Value,
    expanded: usize,
}

/// Reads one YAML document (an empty text is `null`) within `limits`.
pub(crate) fn load(text: &str, limits: &Limits) -> Result<Value, LoadError> {
    if text.len() > limits.max_bytes {
        return Err(LoadError::limit(format!(
            "the document is {} bytes, over the size limit of {}; import fewer workflows at once",
            text.len(),
            size(limits.max_bytes)
        )));
    }
    let started = Instant::now();
    let mut reader = Reader { limits, expanded: 0, aliases: 0, stack: Vec::new(), root: None };
    let mut anchors: HashMap<usize, Anchored> = HashMap::new();
    let mut documents = 0;
    let mut parser = Parser::new_from_str(text);
    let mut events: u64 = 0;
    while let Some(next) = parser.next_event() {
        let (event, span) = next.map_err(|e| {
            let span = Span::empty(*e.marker());
            // The scanner's own bound on flow nesting (255 levels), far past ours.
            if e.info() == "recursion limit exceeded" {
                too_deep(limits, &span)
            } else {
                LoadError::at(&span, e.info())
            }
        })?;
        events += 1;
        if events % 64 == 1 && started.elapsed() >= limits.max_time {
            return Err(LoadError::limit(format!(
                "reading the document took longer than the time limit of {} s; simplify it",
                limits.max_time.as_secs_f64()
            )));
        }
        match event {
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(LoadError::at(
                        &span,
                        "the file holds more than one document; import one document at a time",
                    ));
                }
            }
            Event::Alias(id) => {
                reader.aliases += 1;
                if reader.aliases > limits.max_aliases {
                    return Err(LoadError::limit(format!(
                        "the document has more than {} aliases (the alias limit); write the \
                         values out or use fewer anchors",
                        limits.max_aliases
                    )));
                }
                let Some(anchored) = anchors.get(&id) else {
                    return Err(LoadError::at(&span, "an alias refers to a node that contains it"));
                };
                reader.grow(anchored.expanded)?;
                let value = anchored.value.clone();
                reader.push(value, &span)?;
            }
            Event::Scalar(text, style, anchor, tag) => {
                let weight = text.len().max(1);
                reader.grow(weight)?;
                let value =
                    scalar(&text, style, tag.as_deref()).map_err(|m| LoadError::at(&span, m))?;
                if anchor != 0 {
                    anchors.insert(anchor, Anchored { value: value.clone(), expanded: weight });
                }
                reader.push(value, &span)?;
            }
            Event::SequenceStart(anchor, ref tag) | Event::MappingStart(anchor, ref tag) => {
                let is_map = matches!(event, Event::MappingStart(..));
                let wanted = if is_map { "map" } else { "seq" };
                if let Some(tag) = tag.as_deref()
                    && !(tag.is_yaml_core_schema() && tag.suffix == wanted)
                {
                    return Err(LoadError::at(&span, unsupported_tag(tag)));
                }
                if reader.stack.len() + 1 > limits.max_depth {
                    return Err(too_deep(limits, &span));
                }
                let expanded_at_start = reader.expanded;
                reader.grow(1)?;
                let kind = if is_map {
                    FrameKind::Map { mapping: Mapping::default(), key: None, seen: HashSet::new() }
                } else {
                    FrameKind::Seq(Vec::new())
                };
                reader.stack.push(Frame { kind, anchor, expanded_at_start });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(frame) = reader.stack.pop() else {
                    return Err(LoadError::at(&span, "a collection ends that never started"));
                };
                let value = match frame.kind {
                    FrameKind::Seq(items) => Value::Seq(items),
                    FrameKind::Map { mapping, .. } => Value::Map(mapping),
                };
                if frame.anchor != 0 {
                    let expanded = reader.expanded - frame.expanded_at_start;
                    anchors.insert(frame.anchor, Anchored { value: value.clone(), expanded });
                }
                reader.push(value, &span)?;
            }
        }
    }
    Ok(reader.root.unwrap_or(Value::Null))
}

/// The state of one read: counters, open collections and the finished root.
struct Reader<'a> {
    limits: &'a Limits,
    expanded: usize,
    aliases: usize,
    stack: Vec<Frame>,
    root: Option<Value>,
}

impl Reader<'_> {
    fn grow(&mut self, bytes: usize) -> Result<(), LoadError> {
        self.expanded = self.expanded.saturating_add(bytes);
        if self.expanded > self.limits.max_expanded_bytes {
            return Err(LoadError::limit(format!(
                "the document expands to more than {} (the expanded size limit) when its \
                 aliases are replaced by what they repeat; write less or repeat less",
                size(self.limits.max_expanded_bytes)
            )));
        }
        Ok(())
    }

    /// Adds a finished value to the open collection, or makes it the root.
    fn push(&mut self, value: Value, span: &Span) -> Result<(), LoadError> {
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some(value);
            return Ok(());
        };
        match &mut frame.kind {
            FrameKind::Seq(items) => items.push(value),
            FrameKind::Map { mapping, key, seen } => match key.take() {
                Some(k) => mapping.entries.push((k, value)),
                None => {
                    if matches!(value, Value::Seq(_) | Value::Map(_)) {
                        return Err(LoadError::at(span, "mapping keys must be plain values"));
                    }
                    if !seen.insert(format!("{value:?}")) {
                        let shown = match &value {
                            Value::String(s) => s.clone(),
                            other => other.number().unwrap_or_else(|| format!("{other:?}")),
                        };
                        return Err(LoadError::at(span, format!("duplicate key `{shown}`")));
                    }
                    *key = Some(value);
                }
            },
        }
        Ok(())
    }
}

fn too_deep(limits: &Limits, span: &Span) -> LoadError {
    LoadError::limit(format!(
        "the document nests deeper than {} levels (the depth limit) at line {} column {}; \
         flatten it",
        limits.max_depth,
        span.start.line(),
        span.start.col() + 1
    ))
}

fn unsupported_tag(tag: &Tag) -> String {
    format!("the tag {tag} is not supported; remove it")
}

/// Resolves a scalar by its style and tag (YAML 1.2 core schema).
fn scalar(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Value, String> {
    let Some(tag) = tag else {
        return Ok(match style {
            ScalarStyle::Plain => plain(text),
            _ => Value::String(text.to_owned()),
        });
    };
    // The non-specific tag `!` makes any scalar a string.
    if tag.handle == "!" && tag.suffix.is_empty() {
        return Ok(Value::String(text.to_owned()));
    }
    if !tag.is_yaml_core_schema() {
        return Err(unsupported_tag(tag));
    }
    let resolved = plain(text);
    let fits = match tag.suffix.as_str() {
        "str" => return Ok(Value::String(text.to_owned())),
        "null" => matches!(resolved, Value::Null),
        "bool" => matches!(resolved, Value::Bool(_)),
        "int" => matches!(resolved, Value::Int(_)),
        "float" => match resolved {
            Value::Int(n) => return Ok(Value::Float(n as f64)),
            Value::Float(_) => true,
            _ => false,
        },
        _ => return Err(unsupported_tag(tag)),
    };
    if fits { Ok(resolved) } else { Err(format!("`{text}` is not a valid {tag}")) }
}

/// A plain scalar by the core schema.
fn plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Value::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Value::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Value::Float(f64::NAN),
        _ => {}
    }
    let radix = |prefix: &str, radix: u32| {
        let digits = text.strip_prefix(prefix)?;
        let all = !digits.is_empty() && digits.chars().all(|c| c.is_digit(radix));
        if all { i128::from_str_radix(digits, radix).ok() } else { None }
    };
    if let Some(n) = radix("0x", 16).or_else(|| radix("0o", 8)) {
        return Value::Int(n);
    }
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !unsigned.is_empty()
        && unsigned.bytes().all(|b| b.is_ascii_digit())
        && let Ok(n) = text.parse::<i128>()
    {
        return Value::Int(n);
    }
    if is_float(unsigned)
        && let Ok(f) = text.parse::<f64>()
    {
        return Value::Float(f);
    }
    Value::String(text.to_owned())
}

/// `( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?`, without the sign.
fn is_float(text: &str) -> bool {
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(i) => (&text[..i], Some(&text[i + 1..])),
        None => (text, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", fraction)) => digits(fraction),
        Some((whole, fraction)) => digits(whole) && (fraction.is_empty() || digits(fraction)),
        None => digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)));
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Value {
        load(text, &Limits::DEFAULT).unwrap_or_else(|e| panic!("{text:?}: {}", e.message))
    }

    fn error(text: &str, limits: &Limits) -> String {
        load(text, limits).unwrap_err().message
    }

    #[test]
    fn plain_scalars_follow_the_core_schema() {
        assert_eq!(read("~"), Value::Null);
        assert_eq!(read(""), Value::Null);
        assert_eq!(read("True"), Value::Bool(true));
        assert_eq!(read("yes"), Value::String("yes".into()));
        assert_eq!(read("-12"), Value::Int(-12));
        assert_eq!(read("0x1f"), Value::Int(31));
        assert_eq!(read("0o17"), Value::Int(15));
        assert_eq!(read("1.5e3"), Value::Float(1500.0));
        assert_eq!(read(".5"), Value::Float(0.5));
        assert_eq!(read("-.inf"), Value::Float(f64::NEG_INFINITY));
        assert_eq!(read("1_000"), Value::String("1_000".into()));
        assert_eq!(read("1.2.3"), Value::String("1.2.3".into()));
        assert_eq!(read("'12'"), Value::String("12".into()));
        assert_eq!(read("!!str 12"), Value::String("12".into()));
        assert_eq!(read("!!float 1"), Value::Float(1.0));
        assert!(error("!!int abc", &Limits::DEFAULT).contains("is not a valid"));
        assert!(error("!custom x", &Limits::DEFAULT).contains("not supported"));
    }

    #[test]
    fn mappings_keep_order_and_refuse_duplicate_and_complex_keys() {
        let value = read("b: 1\na: [x, {c: d}]\n");
        let keys: Vec<_> = value.as_mapping().unwrap().keys().cloned().collect();
        assert_eq!(keys, [Value::String("b".into()), Value::String("a".into())]);
        assert_eq!(value.get("a").unwrap().as_sequence().unwrap().len(), 2);
        let dup = error("a: 1\nb: 2\na: 3\n", &Limits::DEFAULT);
        assert_eq!(dup, "invalid yaml: duplicate key `a` at line 3 column 1");
        assert!(error("? [a]\n: 1\n", &Limits::DEFAULT).contains("plain values"));
        assert!(error("a: 1\n---\nb: 2\n", &Limits::DEFAULT).contains("more than one document"));
    }

    #[test]
    fn aliases_copy_their_anchor() {
        let value = read("a: &x [1, 2]\nb: *x\n");
        assert_eq!(value.get("a"), value.get("b"));
        assert!(error("a: &x [1, *x]\n", &Limits::DEFAULT).contains("contains it"));
        assert!(error("a: *nope\n", &Limits::DEFAULT).contains("line 1"));
    }

    #[test]
    fn every_limit_names_itself() {
        let limits = Limits {
            max_bytes: 100,
            max_expanded_bytes: 50,
            max_aliases: 2,
            max_depth: 3,
            max_time: Duration::from_secs(2),
        };
        assert!(error(&"x".repeat(101), &limits).contains("size limit of 100 bytes"));
        assert!(load("a: &a xxxxxxxxxx\nb: [*a, *a]\n", &limits).is_ok());
        assert!(
            error("a: &a xxxxxxxxxxxxxxxxxxxx\nb: [*a, *a]\n", &limits)
                .contains("expanded size limit")
        );
        assert!(error("a: &a x\nb: [*a, *a, *a]\n", &limits).contains("alias limit"));
        assert!(error("a: [[[x]]]\n", &limits).contains("depth limit"));
        assert!(load("a: [[x]]\n", &limits).is_ok());
        assert!(load("a: [x]\n", &limits).is_ok());
        let no_time = Limits { max_time: Duration::ZERO, ..Limits::DEFAULT };
        assert!(error("a: 1\n", &no_time).contains("time limit"));
    }
}
