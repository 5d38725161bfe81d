//! Outbound notifications (issue 18; moved out of the engine by issue 40): one request of
//! one record to one channel. A webhook gets a `POST` of the JSON body it is given, signed
//! with HMAC-SHA256 when the channel has a secret ([`SIGNATURE_HEADER`]); an ntfy topic gets
//! a `POST` of the title. Knows nothing of sessions, tasks or the store: the engine keeps
//! the deliveries (rows, retries, the log) and calls [`Sender::send`] for each attempt.
//!
//! The channel's URL is a secret: errors never carry it (reqwest's `without_url`, and the
//! origin in its place should it appear).
//!
//! Targets (issue 38 item 7): unless the server allows private targets, a notification goes
//! only to a public address ([`kandev_domain::notify::non_public_address`]). An address in
//! the URL is checked before the request; a name is resolved by the client's own resolver
//! (`PublicOnly`), which hands the connector only the public addresses it found, so the
//! connection goes to an address that was checked (a name that resolves to a public address
//! when checked and to 127.0.0.1 when connected — DNS rebinding — is not resolved twice).
//! The guarded client uses no proxy (a proxy would resolve and connect for it, unchecked).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hmac::{KeyInit, Mac};
use kandev_domain::notify::{Channel, ChannelKind, NotificationKind, url_origin};
use sha2::Sha256;

/// The header carrying a webhook body's signature: `sha256=<hex HMAC-SHA256 of the body>`.
pub const SIGNATURE_HEADER: &str = "x-kandev-signature";
/// How long one attempt may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a notification is not sent to an address: it is not public and the server does not
/// allow private targets. The message says how to allow them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the receiver's address {addr} is {kind}: kandev sends notifications only to public \
     addresses unless the server runs with --allow-private-notification-targets \
     (KANDEV_ALLOW_PRIVATE_NOTIFICATION_TARGETS=true)"
)]
pub struct TargetRefused {
    addr: IpAddr,
    kind: &'static str,
}

fn refusal(addr: IpAddr) -> Option<TargetRefused> {
    kandev_domain::notify::non_public_address(addr).map(|kind| TargetRefused { addr, kind })
}

/// The address a channel URL names, when its host is one (`http://127.0.0.1/`,
/// `http://[::1]/`, `http://2130706433/`: the URL parser reads every IPv4 form); `None` for
/// a name or a URL that does not parse.
fn address_in(url: &str) -> Option<IpAddr> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed.host_str()?;
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host).parse().ok()
}

/// Refuses a channel URL whose host is an address that is not public (when it is created; a
/// name is checked on what it resolves to each time a notification is sent).
pub fn check_url(url: &str, allow_private: bool) -> Result<(), TargetRefused> {
    match address_in(url).and_then(refusal) {
        Some(refused) if !allow_private => Err(refused),
        _ => Ok(()),
    }
}

/// The resolver of the guarded client: the system's answer for a name, less every address
/// that is not public; refused when none is left.
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public = public_only(found)?;
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The public addresses of `found`; refused (naming the first address refused) when there
/// is none.
fn public_only(found: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, TargetRefused> {
    let (public, refused): (Vec<_>, Vec<_>) =
        found.into_iter().partition(|addr| refusal(addr.ip()).is_none());
    match (public.is_empty(), refused.first().and_then(|addr| refusal(addr.ip()))) {
        (true, Some(refused)) => Err(refused),
        _ => Ok(public),
    }
}

/// The client notifications go out with: no redirects, a bound per attempt, and unless
/// `allow_private`, only public addresses (see the module's documentation).
#[derive(Clone)]
pub struct Sender {
    client: reqwest::Client,
    allow_private: bool,
}

/// One request to send: the record's kind and title, the delivery's number, and the body a
/// webhook gets (JSON; an ntfy topic gets the title).
pub struct Outgoing<'a> {
    pub channel: &'a Channel,
    pub kind: NotificationKind,
    pub title: &'a str,
    pub delivery_id: i64,
    pub webhook_body: String,
}

/// What one request came to: the receiver's HTTP status (when it answered), why it failed
/// (when it did), and the start of the receiver's answer (for the settings page's Test).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    pub http_status: Option<u16>,
    pub error: Option<String>,
    pub body: Option<String>,
}

/// The most of a receiver's answer kept, in characters.
const ANSWER_CHARS: usize = 500;

/// The start of a response's body, as text (at most [`ANSWER_CHARS`] characters; the rest
/// is not read).
async fn answer_text(mut response: reqwest::Response) -> Option<String> {
    let mut bytes = Vec::new();
    while bytes.len() < ANSWER_CHARS * 4 {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let mut cut: String = text.chars().take(ANSWER_CHARS).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    Some(cut)
}

impl Sender {
    /// The client; an error (the TLS setup failed) says so, without any URL.
    pub fn new(allow_private: bool) -> Result<Sender, String> {
        let mut builder = reqwest::Client::builder()
            .timeout(ATTEMPT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none());
        if !allow_private {
            builder = builder.dns_resolver(Arc::new(PublicOnly)).no_proxy();
        }
        let client = builder
            .build()
            .map_err(|err| format!("cannot build the http client: {}", err.without_url()))?;
        Ok(Sender { client, allow_private })
    }

    /// Sends one request; returns the HTTP status (when an answer came) and why it failed,
    /// or the refusal of a target that is not allowed (nothing was sent).
    pub async fn send(&self, out: Outgoing<'_>) -> Result<Answer, TargetRefused> {
        let channel = out.channel;
        check_url(&channel.url, self.allow_private)?;
        let client = &self.client;
        let request = match channel.kind {
            ChannelKind::Webhook => {
                let body = out.webhook_body;
                let mut request = client
                    .post(&channel.url)
                    .header("content-type", "application/json")
                    .header("x-kandev-event", out.kind.as_str())
                    .header("x-kandev-delivery", out.delivery_id.to_string());
                if let Some(secret) = &channel.secret {
                    request = request.header(SIGNATURE_HEADER, signature(secret, body.as_bytes()));
                }
                request.body(body)
            }
            ChannelKind::Ntfy => client
                .post(&channel.url)
                .header("Title", format!("Kandev: {}", out.kind.as_str().replace('_', " ")))
                .header("Tags", "robot")
                .body(out.title.to_owned()),
        };
        Ok(match request.send().await {
            Ok(response) => {
                let status = response.status();
                let error =
                    (!status.is_success()).then(|| format!("the receiver answered {status}"));
                let body = answer_text(response).await;
                Answer { http_status: Some(status.as_u16()), error, body }
            }
            Err(err) => match refused_in(&err) {
                Some(refused) => return Err(refused),
                None => Answer { error: Some(scrubbed(&err, &channel.url)), ..Answer::default() },
            },
        })
    }
}

/// The refusal of `PublicOnly` behind a failed request, if that is why it failed.
fn refused_in(err: &reqwest::Error) -> Option<TargetRefused> {
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<TargetRefused>() {
            return Some(refused.clone());
        }
        source = cause.source();
    }
    None
}

/// `sha256=<hex HMAC-SHA256 of body with secret>`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let Ok(mut mac) = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()) else {
        return String::new(); // HMAC takes keys of any length
    };
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// Why a request failed, without the URL (reqwest puts it in its message).
fn scrubbed(err: &reqwest::Error, url: &str) -> String {
    let mut text = if err.is_timeout() {
        format!("no answer within {} s", ATTEMPT_TIMEOUT.as_secs())
    } else if err.is_connect() {
        "could not connect to the receiver".to_owned()
    } else {
        let mut text = String::from("the request failed");
        let mut source = std::error::Error::source(err);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        text
    };
    if !url.is_empty() && text.contains(url) {
        text = text.replace(url, &url_origin(url));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i38_7_names_resolve_only_to_their_public_addresses() {
        let addr = |text: &str| text.parse::<SocketAddr>().unwrap();
        let mixed = vec![addr("127.0.0.1:0"), addr("93.184.216.34:0"), addr("[::1]:0")];
        assert_eq!(public_only(mixed), Ok(vec![addr("93.184.216.34:0")]), "only the public one");
        let local = vec![addr("[::1]:0"), addr("127.0.0.1:0")];
        let refused = public_only(local).unwrap_err();
        assert_eq!(refused.addr, addr("[::1]:0").ip());
        assert!(refused.to_string().contains("--allow-private-notification-targets"));
        assert_eq!(public_only(vec![]), Ok(vec![]), "nothing found is the lookup's own error");
    }

    #[test]
    fn i38_7_addresses_in_urls_are_checked_in_every_form() {
        for url in [
            "http://127.0.0.1:9/x",
            "http://2130706433/x",
            "http://0x7f.1/x",
            "http://[::ffff:7f00:1]/x",
            "https://user:pw@169.254.169.254/x",
        ] {
            assert!(check_url(url, false).is_err(), "{url}");
            assert!(check_url(url, true).is_ok(), "{url}: allowed");
        }
        for url in ["http://localhost:9/x", "https://hooks.example.com/x", "http://8.8.8.8/x"] {
            assert!(check_url(url, false).is_ok(), "{url}: a name is checked when sent");
        }
    }

    #[test]
    fn the_signature_is_rfc_4231_hmac_sha256() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
