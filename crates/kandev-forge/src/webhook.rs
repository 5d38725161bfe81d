//! Verifying an inbound webhook delivery before anything reads its body: the sender proves it
//! knows the receiver's secret (a GitHub or generic HMAC-SHA256 signature of the body, or
//! GitLab's secret token), and names the delivery (its id, the key that makes a redelivery
//! harmless) and the event. Pure: no IO, no clock.
//!
//! Invariants:
//! - Nothing is read from a delivery that fails its check; the signature (or token) is
//!   checked first, the delivery and event headers after.
//! - Signatures and tokens are compared in constant time (`hmac`'s `verify_slice`,
//!   `subtle`'s `ct_eq`).
//! - The secret never appears in a `Refusal`, and an empty secret verifies nothing: with no
//!   secret anyone could sign.
//!
//! What this cannot see: a delivery replayed whole (same body, same signature) verifies
//! again; the receiver refuses it by its delivery id.

use hmac::{KeyInit, Mac};
pub use reqwest::header::HeaderMap;
use sha2::Sha256;
use subtle::ConstantTimeEq;

type HmacSha256 = hmac::Hmac<Sha256>;

/// How a sender proves it knows the secret, and where it names the delivery and the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `X-Hub-Signature-256: sha256=<hex HMAC-SHA256>`, `X-GitHub-Delivery`,
    /// `X-GitHub-Event`.
    GitHub,
    /// `X-Gitlab-Token: <secret>`, `X-Gitlab-Event-UUID` (else `Idempotency-Key`),
    /// `X-Gitlab-Event`.
    GitLab,
    /// Any other sender: `X-Kandev-Signature: sha256=<hex HMAC-SHA256>`,
    /// `X-Kandev-Delivery`, `X-Kandev-Event` (see [`sign`]).
    Hmac,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::GitHub => "github",
            Scheme::GitLab => "gitlab",
            Scheme::Hmac => "hmac",
        }
    }

    pub fn parse(value: &str) -> Option<Scheme> {
        [Scheme::GitHub, Scheme::GitLab, Scheme::Hmac].into_iter().find(|s| s.as_str() == value)
    }

    /// The headers the scheme reads.
    fn headers(self) -> Headers {
        match self {
            Scheme::GitHub => Headers {
                sender: "GitHub",
                signature: "X-Hub-Signature-256",
                delivery: &["X-GitHub-Delivery"],
                event: "X-GitHub-Event",
            },
            Scheme::GitLab => Headers {
                sender: "GitLab",
                signature: "X-Gitlab-Token",
                delivery: &["X-Gitlab-Event-UUID", "Idempotency-Key"],
                event: "X-Gitlab-Event",
            },
            Scheme::Hmac => Headers {
                sender: "the sender",
                signature: "X-Kandev-Signature",
                delivery: &["X-Kandev-Delivery"],
                event: "X-Kandev-Event",
            },
        }
    }
}

/// The headers of a scheme, as the messages spell them (a `HeaderMap` finds them in any case).
struct Headers {
    sender: &'static str,
    signature: &'static str,
    /// The first one present names the delivery.
    delivery: &'static [&'static str],
    event: &'static str,
}

/// A delivery that passed its check: its id (unique per delivery, the same when the sender
/// redelivers it) and its event (`issues`, `Issue Hook`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub id: String,
    pub event: String,
}

/// Why a delivery is refused; each message says what to check, and none holds the secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The receiver has no secret to check against.
    #[error("the webhook receiver has no secret; set one in Kandev and the same on the sender")]
    NoSecret,
    /// The signature (or token) header is missing, malformed, or does not match.
    #[error("{0}")]
    BadSignature(String),
    /// The delivery id or the event header is missing.
    #[error("{0}")]
    MissingHeader(String),
}

/// `sha256=<hex HMAC-SHA256 of body keyed with secret>`, as GitHub's `X-Hub-Signature-256`
/// and the generic `X-Kandev-Signature` carry it.
pub fn sign(secret: &str, body: &[u8]) -> String {
    let Some(mut mac) = keyed(secret) else {
        return String::new(); // HMAC takes keys of any length: never reached
    };
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Checks that the delivery of `body` with `headers` was sent by someone who knows `secret`
/// under `scheme`, and reads its id and event.
pub fn verify(
    scheme: Scheme,
    secret: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Delivery, Refusal> {
    if secret.is_empty() {
        return Err(Refusal::NoSecret);
    }
    let names = scheme.headers();
    let given = header(headers, names.signature).ok_or_else(|| {
        Refusal::BadSignature(format!(
            "the delivery has no {} header; check the webhook's secret is set on {}",
            names.signature, names.sender
        ))
    })?;
    match scheme {
        Scheme::GitHub | Scheme::Hmac => check_signature(&names, secret, given, body)?,
        Scheme::GitLab => check_token(&names, secret, given)?,
    }
    // A forge sends these headers itself: missing, the webhook is probably not the forge's.
    let itself = match scheme {
        Scheme::Hmac => String::new(),
        _ => {
            format!(" ({} sends it itself: check the webhook is {}'s)", names.sender, names.sender)
        }
    };
    let id = names.delivery.iter().find_map(|name| header(headers, name)).ok_or_else(|| {
        Refusal::MissingHeader(format!(
            "the delivery has no {} header; send one with a new id for each delivery{itself}",
            names.delivery.join(" or "),
        ))
    })?;
    let event = header(headers, names.event).ok_or_else(|| {
        Refusal::MissingHeader(format!(
            "the delivery has no {} header; send one with the event's name{itself}",
            names.event,
        ))
    })?;
    Ok(Delivery { id: id.to_owned(), event: event.to_owned() })
}

/// `given` (`sha256=<hex>`) is the HMAC-SHA256 of `body` keyed with `secret`.
fn check_signature(names: &Headers, secret: &str, given: &str, body: &[u8]) -> Result<(), Refusal> {
    let tag =
        given.strip_prefix("sha256=").and_then(|hex| hex::decode(hex).ok()).ok_or_else(|| {
            Refusal::BadSignature(format!(
                "the {} header is not sha256=<hex>; check {} signs with HMAC-SHA256",
                names.signature, names.sender
            ))
        })?;
    let mismatch = || {
        Refusal::BadSignature(format!(
            "the {} header does not match the body; check the webhook's secret is the same on {} and in Kandev",
            names.signature, names.sender
        ))
    };
    let mut mac = keyed(secret).ok_or_else(mismatch)?;
    mac.update(body);
    mac.verify_slice(&tag).map_err(|_| mismatch())
}

/// `given` is `secret` (GitLab sends the secret token itself).
fn check_token(names: &Headers, secret: &str, given: &str) -> Result<(), Refusal> {
    if bool::from(given.as_bytes().ct_eq(secret.as_bytes())) {
        return Ok(());
    }
    Err(Refusal::BadSignature(format!(
        "the {} header does not match; check the webhook's secret token is the same on {} and in Kandev",
        names.signature, names.sender
    )))
}

fn keyed(secret: &str) -> Option<HmacSha256> {
    <HmacSha256 as KeyInit>::new_from_slice(secret.as_bytes()).ok()
}

/// The header `name` (in any case), trimmed; `None` when it is absent, empty or not text.
fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let value = headers.get(name)?.to_str().ok()?.trim();
    (!value.is_empty()).then_some(value)
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderName, HeaderValue};

    use super::*;

    const SECRET: &str = "webhook-secret-value";
    const BODY: &[u8] = br#"{"action":"opened","issue":{"number":12}}"#;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
            map.insert(name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    /// A well-formed delivery of `body` under `scheme`, signed (or tokened) with `secret`.
    fn delivery(scheme: Scheme, secret: &str, body: &[u8]) -> Vec<(&'static str, String)> {
        match scheme {
            Scheme::GitHub => vec![
                ("X-Hub-Signature-256", sign(secret, body)),
                ("X-GitHub-Delivery", "d-1".into()),
                ("X-GitHub-Event", "issues".into()),
            ],
            Scheme::GitLab => vec![
                ("X-Gitlab-Token", secret.into()),
                ("X-Gitlab-Event-UUID", "d-1".into()),
                ("X-Gitlab-Event", "Issue Hook".into()),
            ],
            Scheme::Hmac => vec![
                ("X-Kandev-Signature", sign(secret, body)),
                ("X-Kandev-Delivery", "d-1".into()),
                ("X-Kandev-Event", "task".into()),
            ],
        }
    }

    fn as_map(pairs: &[(&str, String)]) -> HeaderMap {
        let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(n, v)| (*n, v.as_str())).collect();
        headers(&borrowed)
    }

    const SCHEMES: [Scheme; 3] = [Scheme::GitHub, Scheme::GitLab, Scheme::Hmac];

    fn event(scheme: Scheme) -> &'static str {
        match scheme {
            Scheme::GitHub => "issues",
            Scheme::GitLab => "Issue Hook",
            Scheme::Hmac => "task",
        }
    }

    #[test]
    fn i47_schemes_parse_from_their_names_and_nothing_else() {
        for scheme in SCHEMES {
            assert_eq!(Scheme::parse(scheme.as_str()), Some(scheme));
        }
        assert_eq!(Scheme::parse("bitbucket"), None);
        assert_eq!(Scheme::parse(""), None);
    }

    /// The signature of RFC 4231's test case 2, so `sign` is HMAC-SHA256 and not merely
    /// consistent with `verify`.
    #[test]
    fn i47_sign_is_hmac_sha256_in_lowercase_hex() {
        let expected = "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
        assert_eq!(sign("Jefe", b"what do ya want for nothing?"), expected);
    }

    #[test]
    fn i47_a_good_delivery_verifies_under_each_scheme() {
        for scheme in SCHEMES {
            let map = as_map(&delivery(scheme, SECRET, BODY));
            let expected = Delivery { id: "d-1".into(), event: event(scheme).into() };
            assert_eq!(verify(scheme, SECRET, &map, BODY), Ok(expected), "{scheme:?}");
        }
    }

    #[test]
    fn i47_a_wrong_secret_is_a_bad_signature_that_never_shows_either_secret() {
        for scheme in SCHEMES {
            let map = as_map(&delivery(scheme, "another-secret", BODY));
            let refused = verify(scheme, SECRET, &map, BODY).unwrap_err();
            assert!(matches!(refused, Refusal::BadSignature(_)), "{scheme:?}: {refused:?}");
            let shown = format!("{refused} {refused:?}");
            assert!(!shown.contains(SECRET) && !shown.contains("another-secret"), "{shown}");
        }
    }

    #[test]
    fn i47_a_body_changed_by_one_byte_is_a_bad_signature() {
        let mut changed = BODY.to_vec();
        changed[20] ^= 1;
        for scheme in [Scheme::GitHub, Scheme::Hmac] {
            let map = as_map(&delivery(scheme, SECRET, BODY));
            let refused = verify(scheme, SECRET, &map, &changed).unwrap_err();
            let Refusal::BadSignature(why) = refused else { panic!("{refused:?}") };
            assert!(why.contains("does not match the body"), "{why}");
        }
    }

    #[test]
    fn i47_a_missing_or_empty_signature_is_a_bad_signature_naming_the_header() {
        for scheme in SCHEMES {
            let mut pairs = delivery(scheme, SECRET, BODY);
            let signature = pairs.remove(0).0;
            let refused = verify(scheme, SECRET, &as_map(&pairs), BODY).unwrap_err();
            let Refusal::BadSignature(why) = refused else { panic!("{refused:?}") };
            assert!(why.contains(&format!("no {signature} header")), "{why}");

            pairs.insert(0, (signature, " ".into()));
            let refused = verify(scheme, SECRET, &as_map(&pairs), BODY).unwrap_err();
            assert!(matches!(refused, Refusal::BadSignature(_)), "{refused:?}");
        }
    }

    #[test]
    fn i47_a_malformed_signature_is_a_bad_signature() {
        let good = sign(SECRET, BODY);
        let hex = &good["sha256=".len()..];
        let cases = [
            format!("sha1={hex}"),
            hex.to_owned(),
            format!("sha256={}", &hex[1..]),
            format!("sha256={}zz", &hex[2..]),
            format!("sha256={}", &hex[2..]),
            "sha256=".to_owned(),
        ];
        for scheme in [Scheme::GitHub, Scheme::Hmac] {
            for given in &cases {
                let mut pairs = delivery(scheme, SECRET, BODY);
                pairs[0].1 = given.clone();
                let refused = verify(scheme, SECRET, &as_map(&pairs), BODY).unwrap_err();
                assert!(matches!(refused, Refusal::BadSignature(_)), "{given}: {refused:?}");
            }
        }
    }

    #[test]
    fn i47_an_upper_case_hex_signature_verifies() {
        let mut pairs = delivery(Scheme::GitHub, SECRET, BODY);
        pairs[0].1 = format!("sha256={}", sign(SECRET, BODY)["sha256=".len()..].to_uppercase());
        assert!(verify(Scheme::GitHub, SECRET, &as_map(&pairs), BODY).is_ok());
    }

    #[test]
    fn i47_a_gitlab_token_must_match_whole() {
        for given in [&SECRET[..SECRET.len() - 1], "webhook-secret-valuex", "WEBHOOK-SECRET-VALUE"]
        {
            let mut pairs = delivery(Scheme::GitLab, SECRET, BODY);
            pairs[0].1 = given.to_owned();
            let refused = verify(Scheme::GitLab, SECRET, &as_map(&pairs), BODY).unwrap_err();
            assert!(matches!(refused, Refusal::BadSignature(_)), "{given}: {refused:?}");
        }
    }

    #[test]
    fn i47_a_missing_delivery_or_event_header_is_a_missing_header_naming_it() {
        for scheme in SCHEMES {
            for (at, name) in [(1, "delivery"), (2, "event")] {
                let mut pairs = delivery(scheme, SECRET, BODY);
                let header = pairs.remove(at).0;
                let refused = verify(scheme, SECRET, &as_map(&pairs), BODY).unwrap_err();
                let Refusal::MissingHeader(why) = refused else {
                    panic!("{scheme:?} {name}: {refused:?}")
                };
                assert!(why.contains(header), "{why}");
            }
        }
    }

    #[test]
    fn i47_a_gitlab_delivery_without_an_event_uuid_is_named_by_its_idempotency_key() {
        let mut pairs = delivery(Scheme::GitLab, SECRET, BODY);
        pairs[1] = ("Idempotency-Key", "key-7".into());
        let read = verify(Scheme::GitLab, SECRET, &as_map(&pairs), BODY).unwrap();
        assert_eq!(read.id, "key-7");
        // Both: the event UUID wins.
        pairs.push(("X-Gitlab-Event-UUID", "uuid-8".into()));
        let read = verify(Scheme::GitLab, SECRET, &as_map(&pairs), BODY).unwrap();
        assert_eq!(read.id, "uuid-8");
    }

    #[test]
    fn i47_header_names_are_read_in_any_case() {
        for scheme in SCHEMES {
            for case in [str::to_lowercase, str::to_uppercase] {
                let pairs: Vec<(String, String)> = delivery(scheme, SECRET, BODY)
                    .into_iter()
                    .map(|(name, value)| (case(name), value))
                    .collect();
                let borrowed: Vec<(&str, &str)> =
                    pairs.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
                let read = verify(scheme, SECRET, &headers(&borrowed), BODY);
                assert_eq!(read.map(|d| d.id), Ok("d-1".to_owned()), "{scheme:?} {:?}", pairs[0]);
            }
        }
    }

    #[test]
    fn i47_an_empty_secret_verifies_nothing() {
        for scheme in SCHEMES {
            let map = as_map(&delivery(scheme, "", BODY));
            assert_eq!(verify(scheme, "", &map, BODY), Err(Refusal::NoSecret), "{scheme:?}");
        }
    }

    #[test]
    fn i47_a_bad_signature_is_reported_before_a_missing_header() {
        let pairs = vec![("X-Hub-Signature-256", sign("another-secret", BODY))];
        let refused = verify(Scheme::GitHub, SECRET, &as_map(&pairs), BODY).unwrap_err();
        assert!(matches!(refused, Refusal::BadSignature(_)), "{refused:?}");
    }
}
