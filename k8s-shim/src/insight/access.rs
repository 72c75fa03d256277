//! Who asks, and whether they may: the asker's bearer token is reviewed by
//! the API server (TokenReview), and what they ask about is checked
//! against their RBAC (SubjectAccessReview), as kube-rbac-proxy does. The
//! API server's service proxy consumes the `Authorization` header, so
//! through it the token comes in `X-Dragon-Token`.

use http::HeaderMap;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;

/// The header that carries the asker's token through the service proxy.
pub const TOKEN_HEADER: &str = "x-dragon-token";
/// The non-resource path whose `get` lets a user read the policy's state.
pub const POLICY_PATH: &str = "/dragon/policy";

/// What an answer reveals, as RBAC names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject<'a> {
    /// One pod (`get pods`).
    Pod { namespace: &'a str, name: &'a str },
    /// The pods of a namespace, or of all (`list pods`).
    Pods { namespace: Option<&'a str> },
    /// The nodes (`list nodes`).
    Nodes,
    /// The policy's state (`get` on [`POLICY_PATH`]).
    Policy,
}

impl Subject<'_> {
    fn describe(&self) -> String {
        match self {
            Subject::Pod { namespace, name } => format!("get pod {namespace}/{name}"),
            Subject::Pods {
                namespace: Some(ns),
            } => format!("list pods in namespace {ns}"),
            Subject::Pods { namespace: None } => "list pods in all namespaces".into(),
            Subject::Nodes => "list nodes".into(),
            Subject::Policy => format!("get {POLICY_PATH}"),
        }
    }
}

/// Why a question is not answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error(
        "no token: send a bearer token in Authorization, or in X-Dragon-Token through the API server's proxy"
    )]
    NoToken,
    #[error("the token was not accepted by the API server{0}")]
    BadToken(String),
    #[error("{user} may not {what}")]
    Forbidden { user: String, what: String },
    #[error("cannot review the asker with the API server: {0}")]
    Unavailable(String),
}

impl Denied {
    /// The HTTP status it is answered with.
    pub fn status(&self) -> u16 {
        match self {
            Denied::NoToken | Denied::BadToken(_) => 401,
            Denied::Forbidden { .. } => 403,
            Denied::Unavailable(_) => 503,
        }
    }
}

/// The asker's token in `headers`.
pub fn token(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let forwarded = headers.get(TOKEN_HEADER).and_then(|v| v.to_str().ok());
    bearer
        .or(forwarded)
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// Reviews askers with the API server, as the scheduler's own identity.
#[derive(Clone)]
pub struct Access {
    client: kube::Client,
}

impl Access {
    pub fn new(client: kube::Client) -> Access {
        Access { client }
    }

    /// Who sent `headers`.
    ///
    /// # Errors
    /// No token, a token the API server does not accept, or no answer.
    pub async fn user(&self, headers: &HeaderMap) -> Result<UserInfo, Denied> {
        let token = token(headers).ok_or(Denied::NoToken)?;
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| Denied::Unavailable(e.to_string()))?;
        let status = reviewed.status.unwrap_or_default();
        match (status.authenticated, status.user) {
            (Some(true), Some(user)) => Ok(user),
            _ => Err(Denied::BadToken(
                status.error.map(|e| format!(": {e}")).unwrap_or_default(),
            )),
        }
    }

    /// Whether `user` may see `subject`.
    ///
    /// # Errors
    /// Not allowed (named), or no answer.
    pub async fn check(&self, user: &UserInfo, subject: &Subject<'_>) -> Result<(), Denied> {
        let resource = |verb: &str, resource: &str, namespace: Option<&str>, name: Option<&str>| {
            Some(ResourceAttributes {
                verb: Some(verb.into()),
                resource: Some(resource.into()),
                namespace: namespace.map(String::from),
                name: name.map(String::from),
                ..ResourceAttributes::default()
            })
        };
        let (resource_attributes, non_resource_attributes) = match subject {
            Subject::Pod { namespace, name } => {
                (resource("get", "pods", Some(namespace), Some(name)), None)
            }
            Subject::Pods { namespace } => (resource("list", "pods", *namespace, None), None),
            Subject::Nodes => (resource("list", "nodes", None, None), None),
            Subject::Policy => (
                None,
                Some(NonResourceAttributes {
                    path: Some(POLICY_PATH.into()),
                    verb: Some("get".into()),
                }),
            ),
        };
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username.clone(),
                groups: user.groups.clone(),
                uid: user.uid.clone(),
                extra: user.extra.clone(),
                resource_attributes,
                non_resource_attributes,
            },
            ..SubjectAccessReview::default()
        };
        let reviewed = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| Denied::Unavailable(e.to_string()))?;
        match reviewed.status.is_some_and(|s| s.allowed) {
            true => Ok(()),
            false => Err(Denied::Forbidden {
                user: user.username.clone().unwrap_or_else(|| "this user".into()),
                what: subject.describe(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_comes_from_authorization_or_through_the_proxy_from_its_own_header() {
        let mut h = HeaderMap::new();
        assert_eq!(token(&h), None);
        h.insert(TOKEN_HEADER, "forwarded".parse().unwrap());
        assert_eq!(token(&h), Some("forwarded"));
        h.insert(
            http::header::AUTHORIZATION,
            "Bearer direct".parse().unwrap(),
        );
        assert_eq!(token(&h), Some("direct"));
        h.insert(http::header::AUTHORIZATION, "Basic x".parse().unwrap());
        assert_eq!(token(&h), Some("forwarded"));
    }
}
