//! Validation of a profile's extra MCP servers (`mcp_servers`): a stdio server (`command`,
//! `args`, `env`) or a remote one (`url`, `headers`, `transport`), each with a unique name
//! other than Kandev's own. Env and header values are secrets like profile env: a value equal
//! to [`SECRET_MASK`] keeps the current value of the same server's variable or header.

use axum::http::{HeaderName, HeaderValue, Uri};
use kandev_api_types::{EnvVarDto, McpServerDto, SECRET_MASK};
use kandev_domain::agent::{EnvVar, McpServerConfig, McpTransport};
use kandev_domain::validate::{FieldError, spoken};

use crate::ApiError;

/// The name of Kandev's own server in the agent's `mcpServers`: not a profile's to take.
const RESERVED: &str = kandev_engine::mcp::SERVER_NAME;
/// Longest server name (agents build tool names from it, e.g. OpenCode's `<server>_<tool>`).
const MAX_NAME: usize = 64;
/// Most extra servers a profile may have.
const MAX_SERVERS: usize = 32;

/// The profile's new MCP servers, checked; `current`: the servers before the change (empty
/// for a new profile, where the mask is refused).
pub(super) fn checked_mcp_servers(
    servers: Vec<McpServerDto>,
    current: &[McpServerConfig],
) -> Result<Vec<McpServerConfig>, ApiError> {
    if servers.len() > MAX_SERVERS {
        return Err(ApiError::validation(format!(
            "{} MCP servers are too many; at most {MAX_SERVERS} are allowed",
            servers.len()
        )));
    }
    let mut checked: Vec<McpServerConfig> = Vec::with_capacity(servers.len());
    for (i, server) in servers.into_iter().enumerate() {
        let at = format!("mcp_servers[{i}]");
        let name = checked_name(&at, &server.name)?;
        if checked.iter().any(|s| s.name().eq_ignore_ascii_case(&name)) {
            let problem = format!("{name:?} is used twice; give each server its own name");
            return Err(refused(&at, "name", problem));
        }
        let was = current.iter().find(|s| s.name() == name);
        checked.push(checked_server(&at, name, server, was)?);
    }
    Ok(checked)
}

/// A refusal of the field `field` of the server at `at` (`mcp_servers[0]`), named in words.
fn refused(at: &str, field: &str, problem: impl Into<String>) -> ApiError {
    let path = if field.is_empty() { at.to_owned() } else { format!("{at}.{field}") };
    FieldError::new(path, problem).into()
}

fn checked_name(at: &str, name: &str) -> Result<String, ApiError> {
    let name = name.trim();
    let valid = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        let problem = format!(
            "{name:?} is not a valid server name: use 1 to {MAX_NAME} letters, digits, '-' or '_'"
        );
        return Err(refused(at, "name", problem));
    }
    if name.eq_ignore_ascii_case(RESERVED) {
        let problem = format!(
            "{name:?} is Kandev's own server, which every agent gets anyway; choose another name"
        );
        return Err(refused(at, "name", problem));
    }
    Ok(name.to_owned())
}

fn checked_server(
    at: &str,
    name: String,
    server: McpServerDto,
    was: Option<&McpServerConfig>,
) -> Result<McpServerConfig, ApiError> {
    let McpServerDto { command, args, env, url, transport, headers, .. } = server;
    let misplaced =
        |field: &str, form: &str| Err(refused(at, field, format!("does not belong to {form}")));
    match (command, url) {
        (Some(_), Some(_)) => Err(refused(
            at,
            "",
            "has both a command and a URL; give a command for a stdio server or a URL for an \
             http server",
        )),
        (None, None) => {
            Err(refused(at, "", "needs a command (a stdio server) or a URL (an http server)"))
        }
        (Some(command), None) => {
            if headers.is_some() {
                return misplaced("headers", "a stdio server (it takes env)");
            }
            if transport.is_some() {
                return misplaced("transport", "a stdio server");
            }
            let command = command.trim().to_owned();
            if command.is_empty() {
                let problem = "is empty; give the program that runs the server";
                return Err(refused(at, "command", problem));
            }
            let kept = match was {
                Some(McpServerConfig::Stdio { env, .. }) => env.as_slice(),
                _ => &[],
            };
            let env = checked_vars(&format!("{at}.env"), env.unwrap_or_default(), kept, env_name)?;
            Ok(McpServerConfig::Stdio { name, command, args: args.unwrap_or_default(), env })
        }
        (None, Some(url)) => {
            if args.is_some() {
                return misplaced("args", "an http server");
            }
            if env.is_some() {
                return misplaced("env", "an http server (it takes headers)");
            }
            let url = url.trim().to_owned();
            if !is_http_url(&url) {
                let problem = "is not an http:// or https:// URL with a host";
                return Err(refused(at, "url", problem));
            }
            let kept = match was {
                Some(McpServerConfig::Remote { headers, .. }) => headers.as_slice(),
                _ => &[],
            };
            let headers =
                checked_vars(&format!("{at}.headers"), headers.unwrap_or_default(), kept, header)?;
            let transport = transport.map(McpTransport::from).unwrap_or(McpTransport::Http);
            Ok(McpServerConfig::Remote { name, transport, url, headers })
        }
    }
}

fn is_http_url(url: &str) -> bool {
    match url.parse::<Uri>() {
        Ok(uri) => {
            matches!(uri.scheme_str(), Some("http" | "https"))
                && uri.host().is_some_and(|h| !h.is_empty())
        }
        Err(_) => false,
    }
}

/// A variable name (`[A-Za-z_][A-Za-z0-9_]*`); any value.
fn env_name(name: &str, _: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// An HTTP header: a token for the name, a value without line breaks.
fn header(name: &str, value: &str) -> bool {
    HeaderName::from_bytes(name.as_bytes()).is_ok() && HeaderValue::from_str(value).is_ok()
}

/// Name-value pairs with secret values: each name valid (`valid`), a [`SECRET_MASK`] value
/// keeps the value of the same name in `current`.
fn checked_vars(
    at: &str,
    vars: Vec<EnvVarDto>,
    current: &[EnvVar],
    valid: fn(&str, &str) -> bool,
) -> Result<Vec<EnvVar>, ApiError> {
    vars.into_iter()
        .enumerate()
        .map(|(i, v)| {
            if !valid(&v.name, &v.value) {
                // The value may be a secret: only the name is repeated.
                return Err(ApiError::validation(format!(
                    "{} {} {:?} is not a valid name, or its value has a line break",
                    spoken(at),
                    i + 1,
                    v.name
                )));
            }
            if let Some(secret) = &v.secret {
                let what = spoken(at);
                return super::profile::secret_reference(&what, i, &v.name, &v.value, secret);
            }
            if v.value != SECRET_MASK {
                return Ok(EnvVar::plain(v.name, v.value));
            }
            match current.iter().find(|c| c.name == v.name) {
                Some(kept) => Ok(kept.clone()),
                None => Err(ApiError::validation(format!(
                    "{} {} is the mask {SECRET_MASK:?}, which keeps a current value, but the \
                     server has no {} yet; give its value",
                    spoken(at),
                    i + 1,
                    v.name
                ))),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_must_be_http_with_a_host() {
        assert!(is_http_url("http://127.0.0.1:3000/mcp"));
        assert!(is_http_url("https://mcp.example.com/sse?x=1"));
        for bad in ["ftp://host/x", "127.0.0.1:3000", "/mcp", "http://", "not a url"] {
            assert!(!is_http_url(bad), "{bad}");
        }
    }

    #[test]
    fn header_names_are_tokens_and_values_have_no_line_breaks() {
        assert!(header("Authorization", "Bearer abc"));
        assert!(!header("Bad Name", "x"));
        assert!(!header("X-Ok", "a\r\nInjected: yes"));
    }
}
