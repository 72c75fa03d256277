//! `/dragon/v1/why/{namespace}/{pod}`, `/dragon/v1/top` and
//! `/dragon/v1/policy` on the HTTP endpoint: each asker reviewed and
//! checked ([`super::access`]), the loop asked through its channel, the
//! answer as JSON. A refusal is JSON too (`{"error": …}`) with the status
//! that says which kind.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use dragon_runtime::PolicySlot;
use serde::Serialize;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

use super::access::{Access, Subject};
use super::{PREFIX, PolicyState, Question, Refusal, Serving, ShadowSummary};
use crate::metrics::Metrics;
use crate::scheduling::{Answer, Msg};

/// Longest a question waits for the loop (an estimate included).
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// What the questions are answered from.
pub struct Insight {
    pub loop_tx: UnboundedSender<Msg>,
    pub access: Access,
    pub slot: Arc<PolicySlot>,
    pub metrics: Arc<Metrics>,
    pub scheduler_name: String,
}

/// The routes, under [`PREFIX`].
pub fn routes(insight: Arc<Insight>) -> Router {
    Router::new()
        .route(&format!("{PREFIX}/why/{{namespace}}/{{pod}}"), get(why))
        .route(&format!("{PREFIX}/top"), get(top))
        .route(&format!("{PREFIX}/policy"), get(policy))
        .with_state(insight)
}

fn json<T: Serialize>(status: u16, body: &T) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let text = serde_json::to_string_pretty(body).unwrap_or_default();
    (status, [("content-type", "application/json")], text).into_response()
}

impl Insight {
    fn refuse(&self, status: u16, error: impl Into<String>) -> Response {
        json(
            status,
            &Refusal {
                error: error.into(),
                scheduler_name: self.scheduler_name.clone(),
            },
        )
    }

    /// Review the asker and check each of `subjects`: the refusal if one
    /// fails.
    async fn allow(&self, headers: &HeaderMap, subjects: &[Subject<'_>]) -> Result<(), Response> {
        let user = self
            .access
            .user(headers)
            .await
            .map_err(|d| self.refuse(d.status(), d.to_string()))?;
        for subject in subjects {
            self.access
                .check(&user, subject)
                .await
                .map_err(|d| self.refuse(d.status(), d.to_string()))?;
        }
        Ok(())
    }

    /// Ask the loop.
    async fn ask(&self, question: Question) -> Result<Answer, Response> {
        let (reply, answer) = oneshot::channel();
        self.loop_tx
            .send(Msg::Ask { question, reply })
            .map_err(|_| self.refuse(503, "the scheduling loop has stopped"))?;
        match tokio::time::timeout(ANSWER_WITHIN, answer).await {
            Ok(Ok(Ok(answer))) => Ok(answer),
            Ok(Ok(Err(refused))) => Err(self.refuse(refused.status, refused.message)),
            Ok(Err(_)) => Err(self.refuse(503, "the scheduling loop dropped the question")),
            Err(_) => Err(self.refuse(
                503,
                format!("no answer within {} s", ANSWER_WITHIN.as_secs()),
            )),
        }
    }
}

async fn why(
    State(s): State<Arc<Insight>>,
    Path((namespace, pod)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let subject = Subject::Pod {
        namespace: &namespace,
        name: &pod,
    };
    if let Err(refused) = s.allow(&headers, &[subject]).await {
        return refused;
    }
    let pod = format!("{namespace}/{pod}");
    match s.ask(Question::Why { pod }).await {
        Ok(Answer::Why(mut why)) => {
            why.scheduler_name = s.scheduler_name.clone();
            json(200, &why)
        }
        Ok(Answer::Top(_)) => s.refuse(500, "the loop answered another question"),
        Err(refused) => refused,
    }
}

/// `?namespace=NS` in a query string.
fn namespace_of(query: Option<&str>) -> Option<String> {
    query?
        .split('&')
        .find_map(|kv| kv.strip_prefix("namespace="))
        .filter(|ns| !ns.is_empty())
        .map(String::from)
}

async fn top(
    State(s): State<Arc<Insight>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let namespace = namespace_of(query.as_deref());
    let pods = Subject::Pods {
        namespace: namespace.as_deref(),
    };
    if let Err(refused) = s.allow(&headers, &[pods]).await {
        return refused;
    }
    // Nodes only for who may list them.
    let nodes = s.allow(&headers, &[Subject::Nodes]).await.is_ok();
    match s.ask(Question::Top { namespace, nodes }).await {
        Ok(Answer::Top(top)) => json(200, &top),
        Ok(Answer::Why(_)) => s.refuse(500, "the loop answered another question"),
        Err(refused) => refused,
    }
}

async fn policy(State(s): State<Arc<Insight>>, headers: HeaderMap) -> Response {
    if let Err(refused) = s.allow(&headers, &[Subject::Policy]).await {
        return refused;
    }
    let current = s.slot.current();
    let info = current.info();
    let shadow = s.metrics.shadow.lock().unwrap_or_else(|p| p.into_inner());
    let state = PolicyState {
        scheduler_name: s.scheduler_name.clone(),
        serving: Serving {
            name: info.name.clone(),
            version: info.version.clone(),
            interface: info.interface_version.clone(),
            origin: info.origin.clone(),
            sha256: info.sha256.clone(),
        },
        shadow: (!shadow.policy.is_empty()).then(|| ShadowSummary {
            policy: shadow.policy.clone(),
            same: shadow.same,
            different: shadow.different,
            errors: shadow.errors,
            skipped: shadow.skipped,
            last_errors: shadow.last_errors.iter().cloned().collect(),
        }),
        reloads: s
            .metrics
            .reload_log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect(),
    };
    drop(shadow);
    json(200, &state)
}

#[cfg(test)]
mod tests {
    use super::namespace_of;

    #[test]
    fn top_takes_its_namespace_from_the_query() {
        assert_eq!(namespace_of(None), None);
        assert_eq!(namespace_of(Some("namespace=ml")), Some("ml".into()));
        assert_eq!(namespace_of(Some("x=1&namespace=ml")), Some("ml".into()));
        assert_eq!(namespace_of(Some("namespace=")), None);
    }
}
