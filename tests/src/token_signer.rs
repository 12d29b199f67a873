//! Registry tokens as distribution's token authentication checks them
//! (`registry/auth/token/token.go`): a JWT signed with ES256 whose `x5c` header carries
//! the signing certificate, issued by a CA the registry trusts (its `rootcertbundle`).
//! The key and both certificates are made at run time.

use anyhow::{Result, anyhow};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use ring::rand::{SecureRandom as _, SystemRandom};
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use serde_json::{Value, json};

/// Signs registry tokens.
pub struct TokenSigner {
    key: EcdsaKeyPair,
    rng: SystemRandom,
    /// The signing certificate (base64 DER, as `x5c` wants it).
    certificate: String,
    /// The CA certificate (PEM), for the registry's `rootcertbundle`.
    pub ca_pem: String,
}

impl TokenSigner {
    /// A new CA and a signing key certified by it.
    pub fn generate() -> Result<Self> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "stevedore test token CA");
        let ca_key = KeyPair::generate()?;
        let ca_pem = ca_params.self_signed(&ca_key)?.pem();
        let issuer = Issuer::new(ca_params, ca_key);
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, "stevedore test token signer");
        let signing_key = KeyPair::generate()?;
        let certificate = params.signed_by(&signing_key, &issuer)?;
        let rng = SystemRandom::new();
        let key = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            &signing_key.serialize_der(),
            &rng,
        )
        .map_err(|err| anyhow!("loading the signing key: {err}"))?;
        Ok(Self {
            key,
            rng,
            certificate: STANDARD.encode(certificate.der()),
            ca_pem,
        })
    }

    /// A compact JWT of `claims`: `header.claims.signature`, the signature being the
    /// fixed-size `r || s` that JOSE's ES256 (and libtrust) expects.
    pub fn sign(&self, claims: &Value) -> Result<String> {
        let header = json!({ "typ": "JWT", "alg": "ES256", "x5c": [self.certificate] });
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header)?),
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims)?)
        );
        let signature = self
            .key
            .sign(&self.rng, signed.as_bytes())
            .map_err(|err| anyhow!("signing a token: {err}"))?;
        Ok(format!(
            "{signed}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        ))
    }

    /// `bytes` random bytes in hex, for token IDs and passwords.
    pub fn random_hex(&self, bytes: usize) -> Result<String> {
        random_hex(&self.rng, bytes)
    }
}

/// `bytes` random bytes from `rng`, in hex.
pub fn random_hex(rng: &SystemRandom, bytes: usize) -> Result<String> {
    let mut buf = vec![0u8; bytes];
    rng.fill(&mut buf)
        .map_err(|err| anyhow!("no random bytes: {err}"))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};

    #[test]
    fn a_token_is_three_parts_whose_signature_verifies_with_the_certified_key() -> Result<()> {
        let signer = TokenSigner::generate()?;
        let token = signer.sign(&json!({ "sub": "alice" }))?;
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3, "{token}");
        let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0])?)?;
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["x5c"][0], signer.certificate.as_str());
        let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1])?)?;
        assert_eq!(claims["sub"], "alice");
        let signature = URL_SAFE_NO_PAD.decode(parts[2])?;
        assert_eq!(signature.len(), 64, "r || s of P-256");
        let public = UnparsedPublicKey::new(
            &ECDSA_P256_SHA256_FIXED,
            ring::signature::KeyPair::public_key(&signer.key).as_ref(),
        );
        let signed = format!("{}.{}", parts[0], parts[1]);
        public
            .verify(signed.as_bytes(), &signature)
            .map_err(|_| anyhow!("the signature does not verify"))?;
        assert!(signer.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        Ok(())
    }
}
