//! TLS on the downstream listener (`[server.tls]`): the certificate chain and key read from
//! PEM files once, at startup, into the acceptor every connection's handshake uses. A file
//! that cannot be read or parsed stops the start with an error naming it; a client whose
//! handshake fails loses only its own connection.

use crate::config::TlsFiles;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use tokio_rustls::TlsAcceptor;

/// Why the listener's TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("server.tls.cert: cannot read certificates from {}: {cause}", path.display())]
    Cert { path: PathBuf, cause: String },
    #[error("server.tls.cert: {} holds no PEM certificate", path.display())]
    NoCert { path: PathBuf },
    #[error("server.tls.key: cannot read a private key from {}: {cause}", path.display())]
    Key { path: PathBuf, cause: String },
    #[error("server.tls: the certificate in {} and the key in {} do not make a TLS config: {cause}", cert.display(), key.display())]
    Mismatch { cert: PathBuf, key: PathBuf, cause: rustls::Error },
}

/// The acceptor for `files`: HTTP/1.1 only (ALPN says so), TLS 1.2 and 1.3, ring's ciphers.
pub fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, TlsError> {
    let certs = certs(&files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| TlsError::Key { path: files.key.clone(), cause: pem_error(&files.key, e) })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|cause| TlsError::Mismatch { cert: files.cert.clone(), key: files.key.clone(), cause })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError::Cert { path: path.to_path_buf(), cause: pem_error(path, e) })?;
    if certs.is_empty() {
        return Err(TlsError::NoCert { path: path.to_path_buf() });
    }
    Ok(certs)
}

fn pem_error(path: &Path, e: rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::Io(io) => io.to_string(),
        Error::NoItemsFound => format!("no PEM section of the right kind in {}", path.display()),
        other => format!("not valid PEM ({other:?})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path, cert: &str, key: &str) -> TlsFiles {
        std::fs::write(dir.join("c.pem"), cert).unwrap();
        std::fs::write(dir.join("k.pem"), key).unwrap();
        TlsFiles { cert: dir.join("c.pem"), key: dir.join("k.pem") }
    }

    #[test]
    fn a_self_signed_pair_loads() {
        let dir = tempfile::tempdir().unwrap();
        let c = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let f = files(dir.path(), &c.cert.pem(), &c.signing_key.serialize_pem());
        assert!(acceptor(&f).is_ok());
    }

    #[test]
    fn bad_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = TlsFiles { cert: dir.path().join("nope.pem"), key: dir.path().join("k.pem") };
        assert!(matches!(acceptor(&missing), Err(TlsError::Cert { path, .. }) if path.ends_with("nope.pem")));
        let c = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let f = files(dir.path(), "not pem at all\n", &c.signing_key.serialize_pem());
        assert!(matches!(acceptor(&f), Err(TlsError::NoCert { .. })));
        let f = files(dir.path(), &c.cert.pem(), "garbage\n");
        let e = acceptor(&f).err().expect("a bad key is refused");
        assert!(matches!(&e, TlsError::Key { path, .. } if path.ends_with("k.pem")), "{e}");
        let other = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let f = files(dir.path(), &c.cert.pem(), &other.signing_key.serialize_pem());
        assert!(matches!(acceptor(&f), Err(TlsError::Mismatch { .. })));
    }
}
