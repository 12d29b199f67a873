//! The credential a caller hands the registry client for one pull: below the client,
//! so the token cache that keys its entries by it need not import the client.

use stevedore_parsers::oci;

/// Credentials for one pull; the agent never stores them.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum Auth {
    #[default]
    Anonymous,
    Basic {
        username: String,
        password: String,
    },
    /// A bearer token (or registry identity token) sent as is.
    Token(String),
}

impl Auth {
    /// A stable name of the credential that does not reveal it (a SHA-256 of it): what
    /// tells two callers' credentials apart in the token cache and in joined pulls.
    pub fn fingerprint(&self) -> String {
        let material = match self {
            Self::Anonymous => return "anonymous".to_owned(),
            Self::Basic { username, password } => format!("basic\0{username}\0{password}"),
            Self::Token(token) => format!("token\0{token}"),
        };
        oci::sha256_digest(material.as_bytes())
    }
}

impl std::fmt::Debug for Auth {
    // Never log secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Anonymous => f.write_str("Anonymous"),
            Self::Basic { username, .. } => write!(f, "Basic({username}, ***)"),
            Self::Token(_) => f.write_str("Token(***)"),
        }
    }
}
