//! Issues as a source of work: the open issues of a repository's project (optionally those
//! with one label), an issue out of an issue webhook's payload, a comment on an issue and
//! closing it. A third `impl ForgeApi` over the same `request`/`call` helpers.
//!
//! Invariants:
//! - An issue's [`ForgeApi::issue_external_id`] depends only on the repository's project and
//!   the issue's number, so an issue seen by a poll and by a webhook has the same id: it is
//!   the idempotency key of the task made from it.
//! - Pull (merge) requests are never issues here (GitHub lists its pull requests among the
//!   issues; they are left out).
//!
//! The list is read as one page of at most 100 issues (`per_page=100`), the newest first
//! (both forges' default order), and never paged on.

use kandev_domain::ship::Forge;
use reqwest::Method;
use serde_json::{Value, json};

use crate::{ForgeApi, ForgeError, Result};

/// An issue of the repository's project.
#[derive(Debug, Clone, PartialEq)]
pub struct Issue {
    /// GitHub's `number`, GitLab's `iid` (the number in the project, not the global id).
    pub number: u64,
    pub title: String,
    /// Empty when the issue has no description.
    pub body: String,
    /// Its web page.
    pub url: String,
    pub labels: Vec<String>,
    pub open: bool,
}

/// A boxed future of a tracker's call (the trait stays usable as `dyn IssueTracker`).
pub type TrackerFuture<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T>> + Send + 'a>>;

/// A tracker whose issues become tasks: what intake and write-back ask of it. GitHub and
/// GitLab implement it through [`ForgeApi`]; another tracker (Jira, Linear) would be one more
/// implementation, and the engine would not change.
pub trait IssueTracker: Send + Sync {
    /// The issue's stable key (the same however the issue is seen).
    fn external_id(&self, number: u64) -> String;
    /// The issue an issue event's payload carries, if it is one of this tracker's.
    fn issue_from_hook(&self, payload: &Value) -> Option<Issue>;
    /// The open issues, with `label` when it is not empty.
    fn open_issues<'a>(
        &'a self,
        client: &'a reqwest::Client,
        label: &'a str,
    ) -> TrackerFuture<'a, Vec<Issue>>;
    fn comment_issue<'a>(
        &'a self,
        client: &'a reqwest::Client,
        number: u64,
        text: &'a str,
    ) -> TrackerFuture<'a, ()>;
    fn close_issue<'a>(&'a self, client: &'a reqwest::Client, number: u64)
    -> TrackerFuture<'a, ()>;
}

impl IssueTracker for ForgeApi {
    fn external_id(&self, number: u64) -> String {
        self.issue_external_id(number)
    }

    fn issue_from_hook(&self, payload: &Value) -> Option<Issue> {
        ForgeApi::issue_from_hook(self, payload)
    }

    fn open_issues<'a>(
        &'a self,
        client: &'a reqwest::Client,
        label: &'a str,
    ) -> TrackerFuture<'a, Vec<Issue>> {
        Box::pin(ForgeApi::open_issues(self, client, label))
    }

    fn comment_issue<'a>(
        &'a self,
        client: &'a reqwest::Client,
        number: u64,
        text: &'a str,
    ) -> TrackerFuture<'a, ()> {
        Box::pin(ForgeApi::comment_issue(self, client, number, text))
    }

    fn close_issue<'a>(
        &'a self,
        client: &'a reqwest::Client,
        number: u64,
    ) -> TrackerFuture<'a, ()> {
        Box::pin(ForgeApi::close_issue(self, client, number))
    }
}

impl ForgeApi {
    /// The open issues of the project, the newest 100, with label `label` when it is not
    /// empty. An entry without a number is left out, as are GitHub's pull requests.
    pub async fn open_issues(&self, client: &reqwest::Client, label: &str) -> Result<Vec<Issue>> {
        let (path, state) = match self.forge {
            Forge::GitHub => (format!("/repos/{}/issues", self.project), "open"),
            Forge::GitLab => (format!("/projects/{}/issues", self.project), "opened"),
        };
        let mut query = vec![("state", state), ("per_page", "100")];
        if !label.is_empty() {
            query.push(("labels", label));
        }
        let request = self.request(client, Method::GET, &path).query(&query);
        let body = self.call(request).await?;
        let items = body.as_array().ok_or_else(|| {
            ForgeError::Unavailable(format!(
                "the {} API answered without a list of issues; check the repository's forge API URL",
                self.forge.as_str()
            ))
        })?;
        Ok(items.iter().filter_map(|item| self.listed_issue(item)).collect())
    }

    /// Adds a comment with `text` (Markdown) to issue `number`.
    pub async fn comment_issue(
        &self,
        client: &reqwest::Client,
        number: u64,
        text: &str,
    ) -> Result<()> {
        let path = match self.forge {
            Forge::GitHub => format!("/repos/{}/issues/{number}/comments", self.project),
            Forge::GitLab => format!("/projects/{}/issues/{number}/notes", self.project),
        };
        let payload = json!({"body": text});
        self.call(self.request(client, Method::POST, &path).json(&payload)).await?;
        Ok(())
    }

    /// Closes issue `number` (closing a closed issue is not an error on either forge).
    pub async fn close_issue(&self, client: &reqwest::Client, number: u64) -> Result<()> {
        let request = match self.forge {
            Forge::GitHub => {
                let path = format!("/repos/{}/issues/{number}", self.project);
                self.request(client, Method::PATCH, &path).json(&json!({"state": "closed"}))
            }
            Forge::GitLab => {
                let path = format!("/projects/{}/issues/{number}", self.project);
                self.request(client, Method::PUT, &path).json(&json!({"state_event": "close"}))
            }
        };
        self.call(request).await?;
        Ok(())
    }

    /// The stable id of issue `number`: `github:owner/repo#12`, `gitlab:group/sub/proj#3`.
    /// The project is lowercased (both forges find projects in any case), so an `origin`
    /// URL that only changes case keeps the ids; one that names another project does not.
    pub fn issue_external_id(&self, number: u64) -> String {
        format!("{}:{}#{number}", self.forge.as_str(), self.project_path().to_lowercase())
    }

    /// The issue of an issue webhook's payload: a GitHub `issues` (or `issue_comment`) event's
    /// `issue`, a GitLab `Issue Hook`'s `object_attributes`. `None` when the payload holds no
    /// issue (another event, a pull request, no number), or when it names another project
    /// than this repository's: its number would then make the id of another issue.
    pub fn issue_from_hook(&self, payload: &Value) -> Option<Issue> {
        match self.forge {
            Forge::GitHub => {
                self.names_this_project(payload, "/repository/full_name")?;
                let issue = payload.get("issue")?;
                if issue.get("pull_request").is_some() {
                    return None;
                }
                github_issue(issue)
            }
            Forge::GitLab => {
                if payload.get("object_kind").and_then(Value::as_str) != Some("issue") {
                    return None;
                }
                self.names_this_project(payload, "/project/path_with_namespace")?;
                let item = payload.get("object_attributes")?;
                let labels = payload.get("labels").or_else(|| item.get("labels"));
                Some(Issue {
                    number: item.get("iid")?.as_u64()?,
                    title: text(item, "title"),
                    body: text(item, "description"),
                    url: text(item, "url"),
                    labels: label_names(labels),
                    open: text(item, "state") == "opened",
                })
            }
        }
    }

    /// An entry of the list `open_issues` reads.
    fn listed_issue(&self, item: &Value) -> Option<Issue> {
        match self.forge {
            Forge::GitHub if item.get("pull_request").is_some() => None,
            Forge::GitHub => github_issue(item),
            Forge::GitLab => Some(Issue {
                number: item.get("iid")?.as_u64()?,
                title: text(item, "title"),
                body: text(item, "description"),
                url: text(item, "web_url"),
                labels: label_names(item.get("labels")),
                open: text(item, "state") == "opened",
            }),
        }
    }

    /// The project as a path (`group/sub/proj`; GitLab's is kept URL-encoded).
    fn project_path(&self) -> String {
        match self.forge {
            Forge::GitHub => self.project.clone(),
            Forge::GitLab => self.project.replace("%2F", "/").replace("%2f", "/"),
        }
    }

    /// `Some` unless the payload names, at `pointer`, a project other than this one.
    fn names_this_project(&self, payload: &Value, pointer: &str) -> Option<()> {
        match payload.pointer(pointer).and_then(Value::as_str) {
            Some(named) if !named.eq_ignore_ascii_case(&self.project_path()) => None,
            _ => Some(()),
        }
    }
}

/// A GitHub issue, as listed or in an `issues` event.
fn github_issue(item: &Value) -> Option<Issue> {
    Some(Issue {
        number: item.get("number")?.as_u64()?,
        title: text(item, "title"),
        body: text(item, "body"),
        url: text(item, "html_url"),
        labels: label_names(item.get("labels")),
        open: text(item, "state") == "open",
    })
}

/// The names of a list of labels: strings (GitLab's issue list), or objects with a `name`
/// (GitHub) or a `title` (GitLab's webhooks).
fn label_names(labels: Option<&Value>) -> Vec<String> {
    let Some(labels) = labels.and_then(Value::as_array) else {
        return vec![];
    };
    let name = |label: &Value| match label {
        Value::String(name) => Some(name.clone()),
        _ => ["name", "title"].iter().find_map(|key| label.get(key)?.as_str()).map(str::to_owned),
    };
    labels.iter().filter_map(name).collect()
}

/// The string at `key`, empty when there is none (or it is null).
fn text(item: &Value, key: &str) -> String {
    item.get(key).and_then(Value::as_str).unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::http::{Method as HttpMethod, StatusCode, Uri};
    use axum::response::IntoResponse;

    use super::*;

    const TOKEN: &str = "test-token-secret";

    /// A request the fake forge saw: method, path with its query, JSON body.
    type Seen = (String, String, Value);
    /// A route: method, path with its query, status, JSON answer.
    type Route = (&'static str, String, u16, Value);

    /// A fake GitHub and GitLab on loopback: answers exactly the routes it is given, 404 with
    /// a forge-style message otherwise, and records every request.
    struct FakeForge {
        url: String,
        seen: Arc<Mutex<Vec<Seen>>>,
        _server: tokio::task::JoinSet<()>,
    }

    impl FakeForge {
        async fn start(routes: Vec<Route>) -> FakeForge {
            let seen = Arc::new(Mutex::new(vec![]));
            let (routes, recorded) = (Arc::new(routes), seen.clone());
            let app = axum::Router::new().fallback(
                move |method: HttpMethod, uri: Uri, body: axum::body::Bytes| {
                    let (routes, seen) = (routes.clone(), recorded.clone());
                    async move {
                        let target = uri.path_and_query().unwrap().as_str().to_owned();
                        let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let route = routes.iter().find(|r| r.0 == method.as_str() && r.1 == target);
                        seen.lock().unwrap().push((method.to_string(), target, body));
                        let (status, answer) = match route {
                            Some((_, _, status, answer)) => (*status, answer.clone()),
                            None => (404, json!({"message": "Not Found"})),
                        };
                        (StatusCode::from_u16(status).unwrap(), axum::Json(answer)).into_response()
                    }
                },
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            let mut server = tokio::task::JoinSet::new();
            server.spawn(async move { axum::serve(listener, app).await.unwrap() });
            FakeForge { url, seen, _server: server }
        }

        fn api(&self, forge: Forge) -> ForgeApi {
            api_at(forge, &self.url)
        }

        fn seen(&self) -> Vec<Seen> {
            self.seen.lock().unwrap().clone()
        }
    }

    /// GitHub's `acme/widget` or GitLab's `acme/tools/widget`, at `url`.
    fn api_at(forge: Forge, url: &str) -> ForgeApi {
        let (base_url, project) = match forge {
            Forge::GitHub => (url.to_owned(), "acme/widget"),
            Forge::GitLab => (format!("{url}/api/v4"), "acme%2Ftools%2Fwidget"),
        };
        ForgeApi { forge, base_url, project: project.to_owned(), token: TOKEN.to_owned() }
    }

    const GITHUB: &str = "/repos/acme/widget";
    const GITLAB: &str = "/api/v4/projects/acme%2Ftools%2Fwidget";

    fn http() -> reqwest::Client {
        crate::client().unwrap()
    }

    fn issue(number: u64, title: &str, body: &str, url: &str, labels: &[&str]) -> Issue {
        Issue {
            number,
            title: title.into(),
            body: body.into(),
            url: url.into(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            open: true,
        }
    }

    #[tokio::test]
    async fn i47_github_open_issues_are_filtered_by_label_and_leave_out_pull_requests() {
        let listed = json!([
            {"number": 12, "title": "Crash on start", "body": "Steps: run it",
             "html_url": "https://github.com/acme/widget/issues/12", "state": "open",
             "labels": [{"name": "kandev ready"}, {"name": "bug"}]},
            {"number": 11, "title": "Bump deps", "body": "", "state": "open",
             "html_url": "https://github.com/acme/widget/pull/11",
             "labels": [{"name": "kandev ready"}],
             "pull_request": {"url": "https://api.github.com/repos/acme/widget/pulls/11"}},
            {"number": 10, "title": "No body", "body": null, "state": "open",
             "html_url": "https://github.com/acme/widget/issues/10",
             "labels": [{"name": "kandev ready"}]},
            {"title": "No number", "state": "open"},
        ]);
        let fake = FakeForge::start(vec![
            (
                "GET",
                format!("{GITHUB}/issues?state=open&per_page=100&labels=kandev+ready"),
                200,
                listed,
            ),
            (
                "GET",
                format!("{GITHUB}/issues?state=open&per_page=100"),
                200,
                json!([{"number": 3, "title": "Any", "state": "open"}]),
            ),
        ])
        .await;
        let api = fake.api(Forge::GitHub);
        let read = api.open_issues(&http(), "kandev ready").await.unwrap();
        let expected = vec![
            issue(
                12,
                "Crash on start",
                "Steps: run it",
                "https://github.com/acme/widget/issues/12",
                &["kandev ready", "bug"],
            ),
            issue(10, "No body", "", "https://github.com/acme/widget/issues/10", &["kandev ready"]),
        ];
        assert_eq!(read, expected);

        let all = api.open_issues(&http(), "").await.unwrap();
        assert_eq!(all, vec![issue(3, "Any", "", "", &[])], "no label: no filter");
        let seen = fake.seen();
        assert!(seen.iter().all(|s| s.0 == "GET"), "{seen:?}");
    }

    #[tokio::test]
    async fn i47_gitlab_open_issues_are_filtered_by_label_and_numbered_by_iid() {
        let listed = json!([
            {"id": 9001, "iid": 3, "title": "Slow export", "description": "It takes minutes",
             "web_url": "https://gitlab.test/acme/tools/widget/-/issues/3", "state": "opened",
             "labels": ["kandev/ready", "perf"]},
            {"id": 9000, "iid": 2, "title": "No description", "description": null,
             "web_url": "https://gitlab.test/acme/tools/widget/-/issues/2", "state": "opened",
             "labels": []},
            {"id": 8999, "title": "No iid", "state": "opened"},
        ]);
        let target = format!("{GITLAB}/issues?state=opened&per_page=100&labels=kandev%2Fready");
        let fake = FakeForge::start(vec![("GET", target, 200, listed)]).await;
        let read = fake.api(Forge::GitLab).open_issues(&http(), "kandev/ready").await.unwrap();
        let expected = vec![
            issue(
                3,
                "Slow export",
                "It takes minutes",
                "https://gitlab.test/acme/tools/widget/-/issues/3",
                &["kandev/ready", "perf"],
            ),
            issue(2, "No description", "", "https://gitlab.test/acme/tools/widget/-/issues/2", &[]),
        ];
        assert_eq!(read, expected);
    }

    #[tokio::test]
    async fn i47_an_answer_that_is_not_a_list_is_unavailable_and_a_refusal_is_refused() {
        let fake = FakeForge::start(vec![(
            "GET",
            format!("{GITHUB}/issues?state=open&per_page=100"),
            200,
            json!({"message": "a single object"}),
        )])
        .await;
        let err = fake.api(Forge::GitHub).open_issues(&http(), "").await.unwrap_err();
        assert!(matches!(err, ForgeError::Unavailable(_)), "{err:?}");

        // No route for GitLab: the fake answers 404.
        let err = fake.api(Forge::GitLab).open_issues(&http(), "").await.unwrap_err();
        let ForgeError::Refused(why) = &err else { panic!("{err:?}") };
        assert!(why.starts_with("gitlab refused (404 Not Found)"), "{why}");
        assert!(!format!("{err:?}").contains(TOKEN));
    }

    #[tokio::test]
    async fn i47_a_comment_is_posted_to_the_issue() {
        let fake = FakeForge::start(vec![
            ("POST", format!("{GITHUB}/issues/12/comments"), 201, json!({"id": 1})),
            ("POST", format!("{GITLAB}/issues/3/notes"), 201, json!({"id": 2})),
        ])
        .await;
        fake.api(Forge::GitHub).comment_issue(&http(), 12, "Working on it").await.unwrap();
        fake.api(Forge::GitLab).comment_issue(&http(), 3, "Done in !7").await.unwrap();
        let expected = vec![
            (
                "POST".to_owned(),
                format!("{GITHUB}/issues/12/comments"),
                json!({"body": "Working on it"}),
            ),
            ("POST".to_owned(), format!("{GITLAB}/issues/3/notes"), json!({"body": "Done in !7"})),
        ];
        assert_eq!(fake.seen(), expected);

        let err = fake.api(Forge::GitHub).comment_issue(&http(), 99, "x").await.unwrap_err();
        assert!(matches!(err, ForgeError::Refused(_)), "a refused comment is an error: {err:?}");
    }

    #[tokio::test]
    async fn i47_an_issue_is_closed_with_each_forge_s_verb_and_field() {
        let fake = FakeForge::start(vec![
            ("PATCH", format!("{GITHUB}/issues/12"), 200, json!({"number": 12})),
            ("PUT", format!("{GITLAB}/issues/3"), 200, json!({"iid": 3})),
        ])
        .await;
        fake.api(Forge::GitHub).close_issue(&http(), 12).await.unwrap();
        fake.api(Forge::GitLab).close_issue(&http(), 3).await.unwrap();
        let expected = vec![
            ("PATCH".to_owned(), format!("{GITHUB}/issues/12"), json!({"state": "closed"})),
            ("PUT".to_owned(), format!("{GITLAB}/issues/3"), json!({"state_event": "close"})),
        ];
        assert_eq!(fake.seen(), expected);
    }

    #[test]
    fn i47_the_external_id_names_the_forge_the_project_path_and_the_number() {
        let url = "http://127.0.0.1:1";
        assert_eq!(api_at(Forge::GitHub, url).issue_external_id(12), "github:acme/widget#12");
        assert_eq!(api_at(Forge::GitLab, url).issue_external_id(3), "gitlab:acme/tools/widget#3");
        let mut cased = api_at(Forge::GitHub, url);
        cased.project = "Acme/Widget".into();
        assert_eq!(cased.issue_external_id(12), "github:acme/widget#12");
    }

    /// The idempotency key: an issue seen by a poll and by a webhook has one id.
    #[tokio::test]
    async fn i47_an_issue_polled_and_hooked_has_the_same_external_id() {
        let listed = json!([{"number": 12, "title": "Crash", "state": "open",
                             "html_url": "https://github.com/acme/widget/issues/12"}]);
        let fake = FakeForge::start(vec![(
            "GET",
            format!("{GITHUB}/issues?state=open&per_page=100"),
            200,
            listed,
        )])
        .await;
        let api = fake.api(Forge::GitHub);
        let polled = api.open_issues(&http(), "").await.unwrap();
        let hook = json!({"action": "opened", "repository": {"full_name": "acme/widget"},
                          "issue": {"number": 12, "title": "Crash", "state": "open"}});
        let hooked = api.issue_from_hook(&hook).unwrap();
        assert_eq!(api.issue_external_id(polled[0].number), api.issue_external_id(hooked.number));
    }

    #[test]
    fn i47_a_github_issues_event_gives_its_issue() {
        let api = api_at(Forge::GitHub, "http://127.0.0.1:1");
        let payload = json!({
            "action": "labeled",
            "repository": {"full_name": "Acme/Widget"},
            "issue": {"number": 12, "title": "Crash on start", "body": "Steps",
                      "html_url": "https://github.com/acme/widget/issues/12", "state": "open",
                      "labels": [{"id": 1, "name": "kandev ready"}]},
        });
        let expected = issue(
            12,
            "Crash on start",
            "Steps",
            "https://github.com/acme/widget/issues/12",
            &["kandev ready"],
        );
        assert_eq!(api.issue_from_hook(&payload), Some(expected));

        let mut closed = payload.clone();
        closed["issue"]["state"] = json!("closed");
        closed["issue"]["body"] = Value::Null;
        let read = api.issue_from_hook(&closed).unwrap();
        assert_eq!((read.open, read.body.as_str()), (false, ""));
    }

    #[test]
    fn i47_a_gitlab_issue_hook_gives_its_issue() {
        let api = api_at(Forge::GitLab, "http://127.0.0.1:1");
        let payload = json!({
            "object_kind": "issue",
            "event_type": "issue",
            "project": {"path_with_namespace": "acme/tools/widget"},
            "object_attributes": {"id": 9001, "iid": 3, "title": "Slow export",
                                  "description": "It takes minutes", "state": "opened",
                                  "url": "https://gitlab.test/acme/tools/widget/-/issues/3",
                                  "action": "open"},
            "labels": [{"id": 5, "title": "kandev/ready"}, {"id": 6, "title": "perf"}],
        });
        let expected = issue(
            3,
            "Slow export",
            "It takes minutes",
            "https://gitlab.test/acme/tools/widget/-/issues/3",
            &["kandev/ready", "perf"],
        );
        assert_eq!(api.issue_from_hook(&payload), Some(expected));

        let mut closed = payload.clone();
        closed["object_attributes"]["state"] = json!("closed");
        closed["object_attributes"]["description"] = Value::Null;
        let read = api.issue_from_hook(&closed).unwrap();
        assert_eq!((read.open, read.body.as_str()), (false, ""));
    }

    #[test]
    fn i47_a_hook_without_an_issue_of_this_project_gives_none() {
        let github = api_at(Forge::GitHub, "http://127.0.0.1:1");
        let gitlab = api_at(Forge::GitLab, "http://127.0.0.1:1");
        let github_issue = json!({"number": 12, "title": "x", "state": "open"});
        let gitlab_issue = json!({"iid": 3, "title": "x", "state": "opened"});
        let cases = [
            (&github, json!({"issue": github_issue.clone()}), true),
            (&github, json!({"zen": "Keep it simple", "hook_id": 1}), false),
            (
                &github,
                json!({"issue": {"number": 13, "pull_request": {"url": "x"}, "state": "open"}}),
                false,
            ),
            (&github, json!({"issue": {"title": "no number"}}), false),
            (
                &github,
                json!({"repository": {"full_name": "other/repo"}, "issue": github_issue}),
                false,
            ),
            (&gitlab, json!({"object_kind": "issue", "object_attributes": gitlab_issue}), true),
            (
                &gitlab,
                json!({"object_kind": "merge_request", "object_attributes": gitlab_issue}),
                false,
            ),
            (&gitlab, json!({"object_kind": "issue", "object_attributes": {"title": "x"}}), false),
            (
                &gitlab,
                json!({"object_kind": "issue", "project": {"path_with_namespace": "acme/other"},
                       "object_attributes": gitlab_issue}),
                false,
            ),
        ];
        for (api, payload, some) in cases {
            assert_eq!(api.issue_from_hook(&payload).is_some(), some, "{payload}");
        }
    }
}
