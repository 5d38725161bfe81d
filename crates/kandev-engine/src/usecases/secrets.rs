//! Secret use cases (issue 50): the engine's face of `crate::secrets`, where the key is kept
//! and values are sealed and opened.

use kandev_domain::secret::{Secret, SecretScope};

use crate::engine::Engine;
use crate::error::Result;

impl Engine {
    /// At start, before anything uses a secret: the key checked (or made for a database
    /// with no secret yet), an interrupted rotation finished, older plain values moved in.
    pub async fn open_secrets(&self) -> Result<()> {
        self.inner.open_secrets().await
    }

    /// `secret.set`: `value` sealed under `name` in `scope`.
    pub async fn set_secret(&self, scope: &SecretScope, name: &str, value: &str) -> Result<Secret> {
        self.inner.set_secret(scope, name, value).await
    }

    /// `secret.remove`.
    pub async fn remove_secret(&self, scope: &SecretScope, name: &str) -> Result<Secret> {
        self.inner.remove_secret(scope, name).await
    }

    /// The id of the key secrets are sealed with.
    pub fn secret_key_id(&self) -> Result<String> {
        self.inner.secret_key_id()
    }

    /// `secret.key.rotate`: answers the new key's id and how many secrets were re-sealed.
    pub async fn rotate_secret_key(&self) -> Result<(String, usize)> {
        self.inner.rotate_secret_key().await
    }
}
