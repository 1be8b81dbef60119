//! Deterministic OCI images from directory trees, and OCI image-layout directories used as image stores.
//!
//! ```no_run
//! # fn main() -> oci_image::Result<()> {
//! use oci_image::{RuntimeConfig, Store};
//! let store = Store::open("/var/cache/slurm-dev/images")?;
//! let layer = store.add_layer("/tmp/root".as_ref(), 1_700_000_000)?;
//! let config = RuntimeConfig { entrypoint: vec!["/bin/sh".into()], ..Default::default() };
//! let manifest = store.add_image(&[layer], config, 1_700_000_000, "example")?;
//! store.tag(&manifest, &["localhost/example:1".to_owned()])?;
//! let image = store.resolve("localhost/example:1")?;
//! store.unpack(&image, "/tmp/unpacked".as_ref())?;
//! # Ok(()) }
//! ```

mod archive;
mod digest;
mod error;
pub mod layer;
pub mod reference;
pub mod spec;
mod store;
mod unpack;

pub use archive::write_archive;
pub use digest::{HashingWriter, sha256};
pub use error::{Error, Result};
pub use spec::{Descriptor, Empty, ImageConfigFile, Index, Manifest, RuntimeConfig};
pub use store::{Image, Store};
pub use unpack::apply_layer;
