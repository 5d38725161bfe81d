//! The sealing of secrets (issue 50): XChaCha20-Poly1305 under one 32-byte key, a fresh
//! random 192-bit nonce per value, and the secret's id as associated data (a sealed value
//! copied onto another row does not open). Nothing else of the engine: the key is kept and
//! used by `secrets.rs`.

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use kandev_domain::secret::Sealed;
use sha2::{Digest, Sha256};

const NONCE_BYTES: usize = 24;

/// The key secrets are sealed with.
#[derive(Clone)]
pub struct SecretKey([u8; 32]);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretKey({})", self.id())
    }
}

impl SecretKey {
    /// A new random key.
    pub fn generate() -> SecretKey {
        SecretKey(XChaCha20Poly1305::generate_key(&mut OsRng).into())
    }

    /// A key as [`Self::encode`] writes it (base64 of 32 bytes).
    pub fn parse(text: &str) -> std::result::Result<SecretKey, String> {
        let bytes = BASE64
            .decode(text.trim())
            .map_err(|_| "the secret key is not base64 text".to_owned())?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|b: Vec<u8>| {
            format!(
                "the secret key is {} bytes; it must be 32 (base64 of 32 random bytes)",
                b.len()
            )
        })?;
        Ok(SecretKey(bytes))
    }

    pub fn encode(&self) -> String {
        BASE64.encode(self.0)
    }

    /// A short fingerprint naming the key (stored with each sealed value): tells which key
    /// a value needs without revealing anything of the key.
    pub fn id(&self) -> String {
        let digest = Sha256::new().chain_update(b"kandev secret key id\0").chain_update(self.0);
        digest.finalize()[..6].iter().map(|b| format!("{b:02x}")).collect()
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(&self.0.into())
    }

    /// `value` sealed for the secret `secret_id` (a fresh random nonce each time).
    pub fn seal(&self, secret_id: &str, value: &str) -> Sealed {
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let payload = Payload { msg: value.as_bytes(), aad: secret_id.as_bytes() };
        let ciphertext =
            self.cipher().encrypt(&nonce, payload).expect("XChaCha20-Poly1305 sealing cannot fail");
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&ciphertext);
        Sealed { key_id: self.id(), sealed: BASE64.encode(bytes) }
    }

    /// The value sealed for `secret_id`; an error when this key did not seal it or the
    /// stored bytes were changed.
    pub fn open(&self, secret_id: &str, sealed: &Sealed) -> std::result::Result<String, String> {
        if sealed.key_id != self.id() {
            return Err(format!(
                "it was sealed with the key {}, and this server's key is {}",
                sealed.key_id,
                self.id()
            ));
        }
        let bytes = BASE64.decode(&sealed.sealed).map_err(|_| "its stored form is damaged")?;
        if bytes.len() < NONCE_BYTES {
            return Err("its stored form is damaged".into());
        }
        let (nonce, ciphertext) = bytes.split_at(NONCE_BYTES);
        let payload = Payload { msg: ciphertext, aad: secret_id.as_bytes() };
        let plain = self
            .cipher()
            .decrypt(XNonce::from_slice(nonce), payload)
            .map_err(|_| "it does not open with this key (changed or copied from another row)")?;
        String::from_utf8(plain).map_err(|_| "its value is not UTF-8".into())
    }
}

/// Where the engine's key comes from, and the key once read.
#[derive(Default)]
pub(crate) struct Vault {
    key: Mutex<Option<Arc<SecretKey>>>,
}

impl Vault {
    pub(crate) fn get(&self) -> Option<Arc<SecretKey>> {
        self.key.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn set(&self, key: SecretKey) -> Arc<SecretKey> {
        let key = Arc::new(key);
        *self.key.lock().unwrap_or_else(|e| e.into_inner()) = Some(key.clone());
        key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_with_its_key_and_row() {
        let key = SecretKey::generate();
        let sealed = key.seal("row-1", "sk-live-123");
        assert!(!sealed.sealed.contains("sk-live-123"));
        assert_eq!(key.open("row-1", &sealed).unwrap(), "sk-live-123");
        assert!(key.open("row-2", &sealed).is_err(), "bound to its row");
        let other = SecretKey::generate();
        assert!(other.open("row-1", &sealed).is_err(), "another key does not open it");
        let forged = Sealed { key_id: other.id(), ..sealed.clone() };
        assert!(other.open("row-1", &forged).is_err(), "a relabelled value does not open");
        assert_ne!(key.seal("row-1", "x").sealed, key.seal("row-1", "x").sealed, "fresh nonces");
    }

    #[test]
    fn keys_round_trip_and_bad_ones_say_why() {
        let key = SecretKey::generate();
        assert_eq!(SecretKey::parse(&key.encode()).unwrap().id(), key.id());
        assert!(SecretKey::parse("not base64!").unwrap_err().contains("base64"));
        assert!(SecretKey::parse(&BASE64.encode([1u8; 16])).unwrap_err().contains("16 bytes"));
        assert!(!format!("{key:?}").contains(&key.encode()), "Debug shows the id only");
    }
}
