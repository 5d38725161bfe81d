//! Notifications that need a person (issue 18): their kinds, the channels that carry them
//! out (webhooks, ntfy), and when a failed delivery is tried again.

use std::time::Duration;

use crate::{SessionId, TaskId, Timestamp};

/// An event that needs a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotificationKind {
    PermissionRequested,
    /// An agent asked the user a question (MCP `ask_user`).
    QuestionAsked,
    TurnCompleted,
    /// A session entered `FAILED` (its start failed).
    SessionFailed,
    /// A task's pull request was merged or closed.
    PrStateChanged,
}

impl NotificationKind {
    pub const ALL: [NotificationKind; 5] = [
        NotificationKind::PermissionRequested,
        NotificationKind::QuestionAsked,
        NotificationKind::TurnCompleted,
        NotificationKind::SessionFailed,
        NotificationKind::PrStateChanged,
    ];

    /// The name on the wire and in `events` of a channel.
    pub fn as_str(self) -> &'static str {
        match self {
            NotificationKind::PermissionRequested => "permission_requested",
            NotificationKind::QuestionAsked => "question_asked",
            NotificationKind::TurnCompleted => "turn_completed",
            NotificationKind::SessionFailed => "session_failed",
            NotificationKind::PrStateChanged => "pr_state_changed",
        }
    }

    pub fn parse(name: &str) -> Option<NotificationKind> {
        NotificationKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// A durable notification record: one per event that needs a person, with the `seq` of the
/// event that announced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationRecord {
    pub id: String,
    pub kind: NotificationKind,
    pub seq: i64,
    pub task_id: TaskId,
    pub session_id: SessionId,
    pub title: String,
    /// JSON object text: what the event said (the permission's title, the stop reason).
    pub data: String,
    pub created_at: Timestamp,
}

/// How a channel delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    /// `POST` of the record as JSON, signed when the channel has a secret.
    Webhook,
    /// `POST` of the title as text to an ntfy topic URL (`Title` and `Tags` headers).
    Ntfy,
}

impl ChannelKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelKind::Webhook => "webhook",
            ChannelKind::Ntfy => "ntfy",
        }
    }

    pub fn parse(name: &str) -> Option<ChannelKind> {
        [ChannelKind::Webhook, ChannelKind::Ntfy].into_iter().find(|k| k.as_str() == name)
    }
}

/// Where notifications of the chosen kinds go. The URL and the secret are secrets: never
/// logged, and answered only as [`url_origin`] and whether there is a secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Channel {
    pub id: String,
    pub kind: ChannelKind,
    pub url: String,
    pub secret: Option<String>,
    /// The server secret (issue 50) a webhook signs with instead of `secret`, by name.
    pub secret_name: Option<String>,
    pub events: Vec<NotificationKind>,
    pub created_at: Timestamp,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("url", &"<hidden>")
            .field("secret_name", &self.secret_name)
            .field("secret", &self.secret.as_ref().map(|_| "<hidden>"))
            .field("events", &self.events)
            .finish()
    }
}

/// `scheme://host[:port]` of a URL, without its path and query (where webhook tokens live);
/// the whole text when it has no `://`, cut at 100 characters.
pub fn url_origin(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(not a URL)".to_owned();
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    // user:password@host: the credentials are secrets too.
    let host = host.rsplit('@').next().unwrap_or_default();
    let origin = format!("{scheme}://{host}");
    origin.chars().take(100).collect()
}

/// What kind of address `ip` is when it reaches this machine or a network around it rather
/// than the internet (`"a loopback address"`), or `None` for a public address. Kandev sends
/// notifications only to public addresses unless the server allows private targets (issue
/// 38 item 7: a channel URL must not make the server probe itself, its networks or a cloud
/// metadata service).
///
/// Refused: loopback (127/8, ::1), unspecified (0/8, ::), private (10/8, 172.16/12,
/// 192.168/16, fc00::/7), link-local (169.254/16, fe80::/10, where metadata services
/// answer), shared (100.64/10, carrier-grade NAT and one cloud's metadata service),
/// IETF-reserved 192.0.0/24, benchmarking 198.18/15, reserved 240/4, broadcast and
/// multicast, the deprecated site-local fec0::/10, and IPv6 forms of any IPv4 address
/// refused (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, and
/// the local NAT64 prefix 64:ff9b:1::/48). Not seen: tunnels that embed an address in other
/// ways (6to4, Teredo), which reach it through a relay on the internet.
pub fn non_public_address(ip: std::net::IpAddr) -> Option<&'static str> {
    match ip {
        std::net::IpAddr::V4(v4) => non_public_v4(v4),
        std::net::IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(ip: std::net::Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match () {
        () if ip.is_loopback() => "a loopback address",
        () if a == 0 => "an unspecified address",
        () if ip.is_private() => "a private address",
        () if ip.is_link_local() => "a link-local address",
        () if a == 100 && (64..128).contains(&b) => "a shared (carrier-grade NAT) address",
        () if a == 192 && b == 0 && c == 0 => "a reserved address",
        () if a == 198 && (b == 18 || b == 19) => "a benchmarking address",
        () if ip.is_broadcast() => "a broadcast address",
        () if ip.is_multicast() => "a multicast address",
        () if a >= 240 => "a reserved address",
        () => return None,
    })
}

fn non_public_v6(ip: std::net::Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    let embedded = || std::net::Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7]));
    Some(match () {
        () if ip.is_loopback() => "a loopback address",
        () if ip.is_unspecified() => "an unspecified address",
        () if ip.to_ipv4_mapped().is_some() || s[..6] == [0; 6] => {
            return non_public_v4(embedded());
        }
        () if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] => return non_public_v4(embedded()),
        () if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 => "a private address",
        () if ip.is_unique_local() => "a private address",
        () if ip.is_unicast_link_local() => "a link-local address",
        () if s[0] & 0xffc0 == 0xfec0 => "a site-local address",
        () if ip.is_multicast() => "a multicast address",
        () => return None,
    })
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// Waiting for its next attempt.
    Pending,
    /// A 2xx answer came.
    Delivered,
    /// Given up: still failing [`RETRY_FOR`] after the notification.
    Failed,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }

    pub fn parse(name: &str) -> Option<DeliveryStatus> {
        [DeliveryStatus::Pending, DeliveryStatus::Delivered, DeliveryStatus::Failed]
            .into_iter()
            .find(|k| k.as_str() == name)
    }
}

/// One try of a delivery, as the delivery log shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub attempt: u32,
    pub at: Timestamp,
    /// The HTTP status, when an answer came.
    pub http_status: Option<u16>,
    /// Why it failed (never the URL), `None` on success.
    pub error: Option<String>,
}

/// A notification's delivery to one channel, with every attempt so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub id: i64,
    pub notification_id: String,
    /// Its record's kind, task and title (what the delivery log shows).
    pub kind: NotificationKind,
    pub task_id: TaskId,
    pub title: String,
    pub channel_id: String,
    pub status: DeliveryStatus,
    pub next_at: Option<Timestamp>,
    pub attempts: Vec<Attempt>,
}

/// How long a failing delivery is retried, counted from its notification.
pub const RETRY_FOR: Duration = Duration::from_secs(24 * 60 * 60);
/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60 * 60);

/// The wait after failed attempt number `attempt` (1-based): `base`, doubled after each
/// failure, at most [`MAX_BACKOFF`]; `None` when the next attempt would come later than
/// [`RETRY_FOR`] after the notification (`since` is how long ago it was made): give up.
pub fn backoff(attempt: u32, base: Duration, since: Duration) -> Option<Duration> {
    let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(31));
    let wait = base.saturating_mul(factor).min(MAX_BACKOFF);
    (since + wait <= RETRY_FOR).then_some(wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_an_hour_and_gives_up_after_a_day() {
        let base = Duration::from_secs(10);
        let zero = Duration::ZERO;
        assert_eq!(backoff(1, base, zero), Some(Duration::from_secs(10)));
        assert_eq!(backoff(2, base, zero), Some(Duration::from_secs(20)));
        assert_eq!(backoff(4, base, zero), Some(Duration::from_secs(80)));
        assert_eq!(backoff(20, base, zero), Some(MAX_BACKOFF));
        assert_eq!(backoff(1000, base, zero), Some(MAX_BACKOFF), "no overflow");
        let almost_a_day = RETRY_FOR - Duration::from_secs(5);
        assert_eq!(backoff(1, base, almost_a_day), None, "past 24 h: given up");
        assert_eq!(backoff(1, Duration::from_secs(5), almost_a_day), Some(Duration::from_secs(5)));
    }

    #[test]
    fn the_origin_of_a_url_hides_its_path_query_and_credentials() {
        assert_eq!(url_origin("http://127.0.0.1:8080/hook/s3cr3t?x=1"), "http://127.0.0.1:8080");
        assert_eq!(url_origin("https://user:pw@hooks.example/T0/B0"), "https://hooks.example");
        assert_eq!(url_origin("nonsense"), "(not a URL)");
    }

    #[test]
    fn i38_7_only_public_addresses_are_targets() {
        let refused = [
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "unspecified"),
            ("10.0.0.1", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "link-local"),
            ("100.64.0.1", "shared"),
            ("100.100.100.200", "shared"),
            ("192.0.0.170", "reserved"),
            ("198.18.0.1", "benchmarking"),
            ("255.255.255.255", "broadcast"),
            ("224.0.0.1", "multicast"),
            ("240.0.0.1", "reserved"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::127.0.0.1", "loopback"),
            ("::10.0.0.1", "private"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
            ("64:ff9b:1::1", "private"),
            ("fd00::1", "private"),
            ("fc00::1", "private"),
            ("fe80::1", "link-local"),
            ("fec0::1", "site-local"),
            ("ff02::1", "multicast"),
        ];
        for (ip, kind) in refused {
            let found = non_public_address(ip.parse().unwrap());
            assert!(found.is_some_and(|f| f.contains(kind)), "{ip}: {found:?}");
        }
        let public = [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "192.0.1.1",
            "198.20.0.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ];
        for ip in public {
            assert_eq!(non_public_address(ip.parse().unwrap()), None, "{ip}");
        }
    }

    #[test]
    fn names_round_trip() {
        for kind in NotificationKind::ALL {
            assert_eq!(NotificationKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(ChannelKind::parse("ntfy"), Some(ChannelKind::Ntfy));
        assert_eq!(DeliveryStatus::parse("failed"), Some(DeliveryStatus::Failed));
        assert_eq!(NotificationKind::parse("nope"), None);
    }
}
