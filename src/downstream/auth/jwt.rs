//! JSON Web Token verification (`[server.auth] mode = "jwt"`): the signature by a public key
//! (a PEM file, or the issuer's JWKS, fetched and kept fresh), then `iss`, `aud`, `exp` and
//! `nbf` within the leeway. Only asymmetric algorithms are accepted, each only with a key of
//! its own family (a token cannot pick HMAC with a public key as its secret).

use crate::config::{JwtKey, JwtSettings};
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

/// The longest JWKS document read.
const MAX_JWKS_BYTES: usize = 1024 * 1024;
/// The least time between fetches for key ids the set lacks (tokens anyone can send).
const MIN_REFETCH: Duration = Duration::from_secs(10);
/// How long a JWKS fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// A verification key and the algorithms it may verify.
struct Key {
    kid: Option<String>,
    key: DecodingKey,
    family: &'static [Algorithm],
}

const RSA: &[Algorithm] =
    &[Algorithm::RS256, Algorithm::RS384, Algorithm::RS512, Algorithm::PS256, Algorithm::PS384, Algorithm::PS512];
const EC: &[Algorithm] = &[Algorithm::ES256, Algorithm::ES384];
const ED: &[Algorithm] = &[Algorithm::EdDSA];

pub struct Verifier {
    settings: JwtSettings,
    keys: RwLock<Arc<Vec<Key>>>,
    jwks: Option<Jwks>,
}

/// The issuer's key set, fetched from its URL.
struct Jwks {
    url: String,
    refresh: Duration,
    /// When the keys were last fetched (or a fetch last failed); held while one runs.
    fetched: tokio::sync::Mutex<Option<Instant>>,
}

impl Verifier {
    pub fn new(settings: &JwtSettings) -> Verifier {
        let (keys, jwks) = match &settings.key {
            JwtKey::Pem(pem) => (pem_key(pem).into_iter().collect(), None),
            JwtKey::Jwks { url, refresh } => {
                (Vec::new(), Some(Jwks { url: url.clone(), refresh: *refresh, fetched: Default::default() }))
            }
        };
        if matches!(settings.key, JwtKey::Pem(_)) && keys.is_empty() {
            tracing::error!("server.auth.key_file holds no RSA, EC or Ed25519 public key: every token is refused");
        }
        Verifier { settings: settings.clone(), keys: RwLock::new(Arc::new(keys)), jwks }
    }

    /// The principal token `token` names, or why it is refused.
    pub async fn verify(&self, token: &str) -> Result<(String, SystemTime), String> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| format!("malformed token: {e}"))?;
        let alg = header.alg;
        if !(RSA.contains(&alg) || EC.contains(&alg) || ED.contains(&alg)) {
            return Err(format!("algorithm {alg:?} is not accepted (only asymmetric ones are)"));
        }
        if let Some(j) = &self.jwks {
            j.refresh_if_stale(&self.keys, false).await;
        }
        let mut found = self.find(header.kid.as_deref(), alg);
        if found.is_none()
            && let Some(j) = &self.jwks
        {
            // A key the set did not have when fetched: rotated in since, perhaps.
            j.refresh_if_stale(&self.keys, true).await;
            found = self.find(header.kid.as_deref(), alg);
        }
        let (keys, i) = found.ok_or_else(|| format!("no key for kid {:?} and algorithm {alg:?}", header.kid))?;
        let mut v = Validation::new(alg);
        v.set_issuer(&[&self.settings.issuer]);
        v.set_audience(&[&self.settings.audience]);
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        v.validate_nbf = true;
        v.leeway = self.settings.leeway.as_secs();
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &keys[i].key, &v)
            .map_err(|e| format!("token refused: {e}"))?;
        // The library takes an array holding the issuer as well; RFC 7519 says one string.
        if !data.claims.get("iss").is_some_and(Value::is_string) {
            return Err("token refused: its iss claim is not one string".into());
        }
        if let Some(missing) = self.settings.scopes.iter().find(|s| !has_scope(&data.claims, s)) {
            return Err(format!("the token lacks scope {missing:?}"));
        }
        // Present and checked by `decode` (a required claim), which reads a fractional one too.
        let exp = data.claims.get("exp").and_then(numeric_date).unwrap_or(Duration::ZERO);
        let expires = UNIX_EPOCH + exp + self.settings.leeway;
        match data.claims.get(&self.settings.principal_claim) {
            Some(Value::String(p)) if !p.is_empty() && !p.chars().any(char::is_control) => Ok((p.clone(), expires)),
            _ => Err(format!("the token has no {:?} claim naming its principal", self.settings.principal_claim)),
        }
    }

    /// The key set and the index of the key for `kid` (any key, without one) that may verify
    /// `alg`.
    fn find(&self, kid: Option<&str>, alg: Algorithm) -> Option<(Arc<Vec<Key>>, usize)> {
        let keys = self.keys.read().unwrap().clone();
        let i = keys.iter().position(|k| k.family.contains(&alg) && (kid.is_none() || k.kid.as_deref() == kid))?;
        Some((keys, i))
    }
}

impl Jwks {
    /// Fetches the set again if it is older than `refresh` (`urgent`: older than a tenth of
    /// it, and at least [`MIN_REFETCH`], for a key id it lacks), one fetch at a time; a
    /// failed fetch keeps the old keys. Only the first fetch is waited for by whoever finds
    /// one running: after it, requests go on with the keys there are.
    async fn refresh_if_stale(&self, keys: &RwLock<Arc<Vec<Key>>>, urgent: bool) {
        let max_age = if urgent { (self.refresh / 10).max(MIN_REFETCH) } else { self.refresh };
        let mut fetched = match self.fetched.try_lock() {
            Ok(f) => f,
            Err(_) if keys.read().unwrap().is_empty() => self.fetched.lock().await,
            Err(_) => return,
        };
        if fetched.is_some_and(|at| at.elapsed() < max_age) {
            return;
        }
        *fetched = Some(Instant::now());
        match tokio::time::timeout(FETCH_TIMEOUT, fetch(&self.url)).await {
            Ok(Ok(set)) => {
                let n = set.len();
                *keys.write().unwrap() = Arc::new(set);
                tracing::debug!(url = %self.url, "fetched the JWKS: {n} usable keys");
            }
            Ok(Err(e)) => tracing::warn!(url = %self.url, "cannot fetch the JWKS: {e}"),
            Err(_) => tracing::warn!(url = %self.url, "cannot fetch the JWKS: no answer within {FETCH_TIMEOUT:?}"),
        }
    }
}

/// The usable keys of the JWKS at `url` (symmetric ones are skipped).
async fn fetch(url: &str) -> Result<Vec<Key>, String> {
    use http_body_util::{BodyExt, Empty, Limited};
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
        .map_err(|e| e.to_string())?
        .https_or_http()
        .enable_http1()
        .build();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, Empty<bytes::Bytes>>(connector);
    let uri: hyper::Uri = url.parse().map_err(|e| format!("{e}"))?;
    let resp = client.get(uri).await.map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status()));
    }
    let body = Limited::new(resp.into_body(), MAX_JWKS_BYTES).collect().await.map_err(|e| e.to_string())?.to_bytes();
    let set: JwkSet = serde_json::from_slice(&body).map_err(|e| format!("not a JWKS: {e}"))?;
    Ok(set
        .keys
        .iter()
        .filter_map(|jwk| {
            let family = match &jwk.algorithm {
                AlgorithmParameters::RSA(_) => RSA,
                AlgorithmParameters::EllipticCurve(_) => EC,
                AlgorithmParameters::OctetKeyPair(_) => ED,
                // Symmetric keys, and whatever a later version adds.
                _ => return None,
            };
            let key = DecodingKey::from_jwk(jwk).ok()?;
            Some(Key { kid: jwk.common.key_id.clone(), key, family })
        })
        .collect())
}

/// The public key in a PEM file, with its family.
fn pem_key(pem: &str) -> Option<Key> {
    let b = pem.as_bytes();
    let (key, family) = if let Ok(k) = DecodingKey::from_rsa_pem(b) {
        (k, RSA)
    } else if let Ok(k) = DecodingKey::from_ec_pem(b) {
        (k, EC)
    } else {
        (DecodingKey::from_ed_pem(b).ok()?, ED)
    };
    Some(Key { kid: None, key, family })
}

/// A NumericDate (RFC 7519, section 2): seconds since the epoch, an integer or not.
fn numeric_date(v: &Value) -> Option<Duration> {
    match v.as_u64() {
        Some(secs) => Some(Duration::from_secs(secs)),
        None => Duration::try_from_secs_f64(v.as_f64()?).ok(),
    }
}

/// Whether the token's `scope` (space-separated) or `scp` (a list) grants `scope`.
fn has_scope(claims: &Map<String, Value>, scope: &str) -> bool {
    let in_scope = claims.get("scope").and_then(Value::as_str).is_some_and(|s| s.split(' ').any(|x| x == scope));
    let in_scp = claims.get("scp").and_then(Value::as_array).is_some_and(|a| a.iter().any(|x| x == scope));
    in_scope || in_scp
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numeric_dates_may_be_fractional() {
        assert_eq!(numeric_date(&json!(1_900_000_000)), Some(Duration::from_secs(1_900_000_000)));
        assert_eq!(numeric_date(&json!(1_900_000_000.25)), Some(Duration::from_secs_f64(1_900_000_000.25)));
        assert_eq!(numeric_date(&json!(-1)), None);
        assert_eq!(numeric_date(&json!(-0.5)), None);
        assert_eq!(numeric_date(&json!("1900000000")), None);
    }
}
