//! The `Authorization: Bearer` value of each request. A token file is re-read once it is a
//! minute old, as client-go does: the kubelet replaces a projected service account token
//! well before it expires, and a pod keeps the same file path.

use std::{
    path::PathBuf,
    sync::Mutex,
    time::{Duration, Instant},
};

use http::HeaderValue;

use super::Token;

/// How long a token read from a file is used before the file is read again.
const REREAD_AFTER: Duration = Duration::from_secs(60);

pub struct Bearer {
    file: Option<PathBuf>,
    current: Mutex<(HeaderValue, Instant)>,
}

impl Bearer {
    /// Reads a token file at once, so a missing or empty file fails the agent's start.
    pub fn new(token: Token) -> anyhow::Result<Self> {
        let (value, file) = match token {
            Token::Fixed(token) => (header_value(&token)?, None),
            Token::File(path) => (read(&path)?, Some(path)),
        };
        Ok(Self {
            file,
            current: Mutex::new((value, Instant::now())),
        })
    }

    /// The header for the next request: the last token read, read again from its file
    /// when it is older than [`REREAD_AFTER`]. A failed re-read keeps the old token (the
    /// apiserver says whether it still holds) and is logged.
    pub fn header(&self) -> HeaderValue {
        let mut current = self
            .current
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some(path) = &self.file
            && current.1.elapsed() >= REREAD_AFTER
        {
            current.1 = Instant::now();
            match read(path) {
                Ok(value) => current.0 = value,
                Err(err) => tracing::warn!(error = %err, "keeping the last service account token"),
            }
        }
        current.0.clone()
    }
}

fn read(path: &PathBuf) -> anyhow::Result<HeaderValue> {
    let token = std::fs::read_to_string(path)
        .map_err(|err| anyhow::anyhow!("reading the token {}: {err}", path.display()))?;
    header_value(&token).map_err(|err| anyhow::anyhow!("the token in {}: {err}", path.display()))
}

fn header_value(token: &str) -> anyhow::Result<HeaderValue> {
    let token = token.trim();
    if token.is_empty() {
        anyhow::bail!("the bearer token is empty");
    }
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| anyhow::anyhow!("the bearer token holds characters a header cannot"))?;
    value.set_sensitive(true);
    Ok(value)
}
