//! Writes Stevedore's CRDs as YAML into a directory (default `deploy/crds`), one file
//! per CRD. CI regenerates them and fails on any difference.

use std::path::PathBuf;

use anyhow::Context as _;

fn main() -> anyhow::Result<()> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "deploy/crds".into()),
    );
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for crd in stevedore_api::crds() {
        let path = dir.join(stevedore_api::crd_file_name(&crd));
        let yaml = stevedore_api::crd_yaml(&crd)?;
        std::fs::write(&path, yaml).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
