//! The driver's services over a real Unix socket in a temp dir, as the sidecars and the
//! kubelet call them; mounts go to a recording double (the real ones need root and are
//! exercised by the csi_storage component suite on the local cluster).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use stevedore_csi_hostpath::capacity::GIB;
use stevedore_csi_hostpath::controller::ControllerService;
use stevedore_csi_hostpath::csi::controller_client::ControllerClient;
use stevedore_csi_hostpath::csi::controller_server::ControllerServer;
use stevedore_csi_hostpath::csi::node_client::NodeClient;
use stevedore_csi_hostpath::csi::node_server::NodeServer;
use stevedore_csi_hostpath::csi::volume_capability::access_mode::Mode;
use stevedore_csi_hostpath::csi::volume_capability::{AccessMode, AccessType, MountVolume};
use stevedore_csi_hostpath::csi::{
    CapacityRange, ControllerExpandVolumeRequest, CreateVolumeRequest, DeleteVolumeRequest,
    NodeGetInfoRequest, NodePublishVolumeRequest, NodeUnpublishVolumeRequest, VolumeCapability,
};
use stevedore_csi_hostpath::layout::Layout;
use stevedore_csi_hostpath::mounts::{MountError, Mounter};
use stevedore_csi_hostpath::node::NodeService;
use stevedore_csi_hostpath::pluginregistration::InfoRequest;
use stevedore_csi_hostpath::pluginregistration::registration_client::RegistrationClient;
use stevedore_csi_hostpath::pluginregistration::registration_server::RegistrationServer;
use stevedore_csi_hostpath::registration::RegistrationService;
use stevedore_csi_hostpath::serve;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Channel, Endpoint, Server};

#[derive(Default)]
struct RecordingMounter {
    mounted: Mutex<BTreeSet<PathBuf>>,
    calls: Mutex<Vec<String>>,
}

impl Mounter for RecordingMounter {
    fn is_mount_point(&self, path: &Path) -> Result<bool, MountError> {
        Ok(self.mounted.lock().expect("lock").contains(path))
    }
    fn bind(&self, source: &Path, target: &Path, readonly: bool) -> Result<(), MountError> {
        let call = format!(
            "bind {} {} ro={readonly}",
            source.display(),
            target.display()
        );
        self.calls.lock().expect("lock").push(call);
        self.mounted.lock().expect("lock").insert(target.to_owned());
        Ok(())
    }
    fn unmount(&self, target: &Path) -> Result<(), MountError> {
        self.calls
            .lock()
            .expect("lock")
            .push(format!("unmount {}", target.display()));
        self.mounted.lock().expect("lock").remove(target);
        Ok(())
    }
}

async fn channel(path: PathBuf) -> Channel {
    Endpoint::from_static("http://csi.invalid")
        .connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            async move {
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                    tokio::net::UnixStream::connect(path).await?,
                ))
            }
        }))
        .await
        .expect("connected to the driver's socket")
}

fn mount_capability() -> VolumeCapability {
    VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    }
}

fn range(required_bytes: i64) -> Option<CapacityRange> {
    Some(CapacityRange {
        required_bytes,
        limit_bytes: 0,
    })
}

struct Driver {
    root: tempfile::TempDir,
    socket: PathBuf,
    mounter: Arc<RecordingMounter>,
    shutdown: CancellationToken,
}

async fn start_driver() -> Driver {
    let root = tempfile::tempdir().expect("temp dir");
    let layout = Layout::new(root.path().join("state"));
    std::fs::create_dir_all(layout.volumes_dir()).expect("volumes dir");
    let mounter = Arc::new(RecordingMounter::default());
    let node = NodeService {
        node_name: "node-a".to_owned(),
        layout: layout.clone(),
        mounter: Arc::clone(&mounter),
    };
    let router = Server::builder()
        .add_service(ControllerServer::new(
            ControllerService::open(layout).expect("opened"),
        ))
        .add_service(NodeServer::new(node));
    let socket = root.path().join("csi.sock");
    let listener = serve::bind(&socket).expect("bound");
    let shutdown = CancellationToken::new();
    tokio::spawn(serve::serve(
        router,
        listener,
        socket.clone(),
        shutdown.clone(),
    ));
    Driver {
        root,
        socket,
        mounter,
        shutdown,
    }
}

#[tokio::test]
async fn create_expand_and_delete_keep_the_directory_and_the_record_in_step() {
    let driver = start_driver().await;
    let mut controller = ControllerClient::new(channel(driver.socket.clone()).await);
    let create = CreateVolumeRequest {
        name: "pvc-1".to_owned(),
        capacity_range: range(GIB),
        volume_capabilities: vec![mount_capability()],
        parameters: Default::default(),
    };
    let volume = controller
        .create_volume(create.clone())
        .await
        .expect("created");
    let volume = volume.into_inner().volume.expect("a volume");
    assert_eq!(
        (volume.volume_id.as_str(), volume.capacity_bytes),
        ("pvc-1", GIB)
    );
    let dir = driver.root.path().join("state/volumes/pvc-1");
    assert!(dir.is_dir(), "the volume's directory exists");
    // A retried create answers the same volume.
    let again = controller.create_volume(create).await.expect("idempotent");
    assert_eq!(
        again.into_inner().volume.map(|v| v.capacity_bytes),
        Some(GIB)
    );

    let expand = ControllerExpandVolumeRequest {
        volume_id: "pvc-1".to_owned(),
        capacity_range: range(2 * GIB),
        volume_capability: Some(mount_capability()),
    };
    let expanded = controller
        .controller_expand_volume(expand)
        .await
        .expect("expanded");
    let expanded = expanded.into_inner();
    assert_eq!(expanded.capacity_bytes, 2 * GIB);
    assert!(expanded.node_expansion_required);
    let record = std::fs::read_to_string(driver.root.path().join("state/volumes.json"))
        .expect("the record is on disk");
    assert!(record.contains(&(2 * GIB).to_string()), "{record}");

    let delete = DeleteVolumeRequest {
        volume_id: "pvc-1".to_owned(),
    };
    controller
        .delete_volume(delete.clone())
        .await
        .expect("deleted");
    assert!(!dir.exists(), "the directory is gone");
    controller
        .delete_volume(delete)
        .await
        .expect("deleting again succeeds");
    driver.shutdown.cancel();
}

#[tokio::test]
async fn refusals_carry_the_code_and_the_field() {
    let driver = start_driver().await;
    let mut controller = ControllerClient::new(channel(driver.socket.clone()).await);
    let escape = CreateVolumeRequest {
        name: "../outside".to_owned(),
        capacity_range: range(GIB),
        volume_capabilities: vec![mount_capability()],
        parameters: Default::default(),
    };
    let refused = controller.create_volume(escape).await.expect_err("refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(
        refused.message().starts_with("name \"../outside\""),
        "{}",
        refused.message()
    );
    let unknown = ControllerExpandVolumeRequest {
        volume_id: "pvc-missing".to_owned(),
        capacity_range: range(GIB),
        volume_capability: None,
    };
    let refused = controller
        .controller_expand_volume(unknown)
        .await
        .expect_err("no such volume");
    assert_eq!(refused.code(), tonic::Code::NotFound);
    driver.shutdown.cancel();
}

#[tokio::test]
async fn publish_binds_the_volume_directory_once_and_unpublish_undoes_it() {
    let driver = start_driver().await;
    let channel = channel(driver.socket.clone()).await;
    let mut controller = ControllerClient::new(channel.clone());
    let mut node = NodeClient::new(channel);
    let create = CreateVolumeRequest {
        name: "pvc-2".to_owned(),
        capacity_range: range(GIB),
        volume_capabilities: vec![mount_capability()],
        parameters: Default::default(),
    };
    controller.create_volume(create).await.expect("created");
    let target = driver.root.path().join("pods/p/mount");
    let publish = NodePublishVolumeRequest {
        volume_id: "pvc-2".to_owned(),
        target_path: target.display().to_string(),
        volume_capability: Some(mount_capability()),
        readonly: false,
    };
    node.node_publish_volume(publish.clone())
        .await
        .expect("published");
    node.node_publish_volume(publish)
        .await
        .expect("published again");
    assert!(target.is_dir(), "the target directory was made");
    let unpublish = NodeUnpublishVolumeRequest {
        volume_id: "pvc-2".to_owned(),
        target_path: target.display().to_string(),
    };
    node.node_unpublish_volume(unpublish)
        .await
        .expect("unpublished");
    assert!(!target.exists(), "the target directory was removed");
    let source = driver.root.path().join("state/volumes/pvc-2");
    let calls = driver.mounter.calls.lock().expect("lock").clone();
    assert_eq!(
        calls,
        vec![
            format!("bind {} {} ro=false", source.display(), target.display()),
            format!("unmount {}", target.display()),
        ]
    );
    let info = node
        .node_get_info(NodeGetInfoRequest {})
        .await
        .expect("info");
    assert_eq!(info.into_inner().node_id, "node-a");
    driver.shutdown.cancel();
}

#[tokio::test]
async fn registration_names_the_csi_plugin_and_its_endpoint() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("reg.sock");
    let service = RegistrationService {
        driver_name: "hostpath.csi.stevedore.dev".to_owned(),
        csi_endpoint: "/var/lib/kubelet/plugins/x/csi.sock".to_owned(),
    };
    let router = Server::builder().add_service(RegistrationServer::new(service));
    let listener = serve::bind(&socket).expect("bound");
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(serve::serve(
        router,
        listener,
        socket.clone(),
        shutdown.clone(),
    ));
    let mut client = RegistrationClient::new(channel(socket.clone()).await);
    let info = client
        .get_info(InfoRequest {})
        .await
        .expect("info")
        .into_inner();
    assert_eq!(info.r#type, "CSIPlugin");
    assert_eq!(info.name, "hostpath.csi.stevedore.dev");
    assert_eq!(info.endpoint, "/var/lib/kubelet/plugins/x/csi.sock");
    assert_eq!(info.supported_versions, vec!["1.0.0".to_owned()]);
    shutdown.cancel();
    server.await.expect("joined").expect("served");
    assert!(
        !socket.exists(),
        "the socket is removed on shutdown, so the kubelet drops the plugin"
    );
}

/// An HPACK string literal, not Huffman-coded (all lengths here are below 127).
fn hpack_string(s: &[u8]) -> Vec<u8> {
    [&[u8::try_from(s.len()).expect("short")][..], s].concat()
}

fn frame(kind: u8, flags: u8, stream: u8, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("small").to_be_bytes();
    [
        &[len[1], len[2], len[3], kind, flags, 0, 0, 0, stream][..],
        payload,
    ]
    .concat()
}

/// A GetInfo call as the kubelet's registration client makes it: its `:authority` is the
/// socket's path, which h2 refuses unless the driver rewrites it.
fn kubelet_get_info(socket: &Path) -> Vec<u8> {
    let block = [
        &[0x83, 0x86][..], // :method POST, :scheme http
        &[0x44],
        &hpack_string(b"/pluginregistration.Registration/GetInfo"),
        &[0x41],
        &hpack_string(socket.display().to_string().as_bytes()),
        &[0x5f],
        &hpack_string(b"application/grpc"),
        &[0x40],
        &hpack_string(b"te"),
        &hpack_string(b"trailers"),
    ]
    .concat();
    let empty_message = [0u8, 0, 0, 0, 0];
    [
        &b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..],
        &frame(0x4, 0, 0, &[]),              // SETTINGS
        &frame(0x1, 0x4, 1, &block),         // HEADERS, END_HEADERS
        &frame(0x0, 0x1, 1, &empty_message), // DATA, END_STREAM
    ]
    .concat()
}

/// Reads frames until a DATA frame on stream 1 (its payload) or a RST_STREAM (None).
async fn first_response_data(stream: &mut tokio::net::UnixStream) -> Option<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let mut head = [0u8; 9];
        stream.read_exact(&mut head).await.ok()?;
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        let mut payload = vec![0u8; len];
        stream.read_exact(&mut payload).await.ok()?;
        match head[3] {
            0x0 if head[8] == 1 => return Some(payload),
            0x3 => return None,
            0x4 if head[4] & 0x1 == 0 => stream.write_all(&frame(0x4, 0x1, 0, &[])).await.ok()?,
            _ => {}
        }
    }
}

#[tokio::test]
async fn registration_answers_a_request_whose_authority_is_the_socket_path() {
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("reg.sock");
    let service = RegistrationService {
        driver_name: "hostpath.csi.stevedore.dev".to_owned(),
        csi_endpoint: "/csi.sock".to_owned(),
    };
    let router = Server::builder().add_service(RegistrationServer::new(service));
    let listener = serve::bind(&socket).expect("bound");
    let shutdown = CancellationToken::new();
    tokio::spawn(serve::serve_rewriting_authority(
        router,
        listener,
        socket.clone(),
        shutdown.clone(),
    ));
    let mut stream = tokio::net::UnixStream::connect(&socket)
        .await
        .expect("connected");
    stream
        .write_all(&kubelet_get_info(&socket))
        .await
        .expect("sent");
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        first_response_data(&mut stream),
    )
    .await
    .expect("an answer within 10 s")
    .expect("a DATA frame, not a reset stream");
    let text = String::from_utf8_lossy(&answer);
    assert!(
        text.contains("CSIPlugin") && text.contains("hostpath.csi.stevedore.dev"),
        "{text}"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn validate_volume_capabilities_confirms_mounts_and_explains_a_refusal() {
    use stevedore_csi_hostpath::csi::ValidateVolumeCapabilitiesRequest;
    use stevedore_csi_hostpath::csi::volume_capability::BlockVolume;
    let driver = start_driver().await;
    let mut controller = ControllerClient::new(channel(driver.socket.clone()).await);
    let create = CreateVolumeRequest {
        name: "pvc-3".to_owned(),
        capacity_range: range(GIB),
        volume_capabilities: vec![mount_capability()],
        parameters: Default::default(),
    };
    controller.create_volume(create).await.expect("created");
    let ask = |capability: VolumeCapability| ValidateVolumeCapabilitiesRequest {
        volume_id: "pvc-3".to_owned(),
        volume_context: Default::default(),
        volume_capabilities: vec![capability],
        parameters: Default::default(),
    };
    let confirmed = controller
        .validate_volume_capabilities(ask(mount_capability()))
        .await
        .expect("answered")
        .into_inner();
    assert!(confirmed.confirmed.is_some(), "a mount is confirmed");
    let block = VolumeCapability {
        access_type: Some(AccessType::Block(BlockVolume {})),
        ..mount_capability()
    };
    let refused = controller
        .validate_volume_capabilities(ask(block))
        .await
        .expect("a refusal is an answer, not an error")
        .into_inner();
    assert!(refused.confirmed.is_none());
    assert!(
        refused.message.contains("block volume"),
        "{}",
        refused.message
    );
    let mut unknown = ask(mount_capability());
    unknown.volume_id = "pvc-none".to_owned();
    let missing = controller
        .validate_volume_capabilities(unknown)
        .await
        .expect_err("no such volume");
    assert_eq!(missing.code(), tonic::Code::NotFound);
    driver.shutdown.cancel();
}
