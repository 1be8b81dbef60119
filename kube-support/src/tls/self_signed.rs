//! A CA made for this process and a serving certificate it signed: no cert-manager, nothing to
//! renew, and the CA goes into the webhook configuration's `caBundle`.

use rustls::sign::CertifiedKey;

use super::certified_key;

/// A CA made for this process, and a serving certificate it signed.
pub struct SelfSigned {
    /// The CA certificate, PEM: the `caBundle` of the webhook configuration.
    pub ca_pem: String,
    /// The serving certificate (chain: leaf, then the CA) and its key.
    pub key: CertifiedKey,
}

/// Makes a CA with the common name `<name>-ca` and a serving certificate it signed for `names`
/// (DNS names or IP addresses; the first is the common name, `name` when there is none).
pub fn self_signed(name: &str, names: &[String]) -> anyhow::Result<SelfSigned> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.distinguished_name
        .push(DnType::CommonName, format!("{name}-ca"));
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let mut leaf = CertificateParams::new(names.to_vec())?;
    leaf.distinguished_name.push(
        DnType::CommonName,
        names.first().map_or(name, String::as_str),
    );
    let leaf_key = KeyPair::generate()?;
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;
    let key = certified_key(
        format!("{}{}", leaf_cert.pem(), ca_cert.pem()).as_bytes(),
        leaf_key.serialize_pem().as_bytes(),
    )?;
    Ok(SelfSigned {
        ca_pem: ca_cert.pem(),
        key,
    })
}
