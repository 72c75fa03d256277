//! In-tree volumes as CSI drivers serve them since CSI migration: a
//! PersistentVolume of an in-tree source that csi-translation-lib
//! translates (AWS EBS, GCE PD, Azure Disk, Cinder, Portworx) counts
//! against its CSI driver's attach limit as NodeVolumeLimits counts it,
//! under the driver's name and a handle naming the same disk.

use dragon_framework::volumes::CsiVolume;
use k8s_openapi::api::core::v1 as core;

/// The CSI volume an in-tree source is served as, if it is one that
/// migrates.
pub fn migrated(spec: &core::PersistentVolumeSpec) -> Option<CsiVolume> {
    source_volume(
        spec.aws_elastic_block_store.as_ref(),
        spec.gce_persistent_disk.as_ref(),
        spec.azure_disk.as_ref(),
        spec.cinder.as_ref().map(|c| c.volume_id.as_str()),
        spec.portworx_volume.as_ref().map(|p| p.volume_id.as_str()),
    )
}

/// The CSI volumes a pod's inline in-tree volumes are served as.
pub fn migrated_inline(pod: &core::Pod) -> Vec<CsiVolume> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| {
            source_volume(
                v.aws_elastic_block_store.as_ref(),
                v.gce_persistent_disk.as_ref(),
                v.azure_disk.as_ref(),
                v.cinder.as_ref().map(|c| c.volume_id.as_str()),
                v.portworx_volume.as_ref().map(|p| p.volume_id.as_str()),
            )
        })
        .collect()
}

/// The sources a PersistentVolume and a pod's volume share.
fn source_volume(
    ebs: Option<&core::AWSElasticBlockStoreVolumeSource>,
    pd: Option<&core::GCEPersistentDiskVolumeSource>,
    azure: Option<&core::AzureDiskVolumeSource>,
    cinder: Option<&str>,
    portworx: Option<&str>,
) -> Option<CsiVolume> {
    let (driver, handle) = if let Some(s) = ebs {
        // `aws://ZONE/vol-…` or `vol-…`: the volume's own ID.
        let id = s.volume_id.rsplit('/').next().unwrap_or(&s.volume_id);
        ("ebs.csi.aws.com", id.to_string())
    } else if let Some(s) = pd {
        (
            "pd.csi.storage.gke.io",
            format!("projects/UNSPECIFIED/disks/{}", s.pd_name),
        )
    } else if let Some(s) = azure {
        ("disk.csi.azure.com", s.disk_uri.clone())
    } else if let Some(id) = cinder {
        ("cinder.csi.openstack.org", id.to_string())
    } else if let Some(id) = portworx {
        ("pxd.portworx.com", id.to_string())
    } else {
        return None;
    };
    Some(CsiVolume {
        driver: driver.to_string(),
        handle,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn in_tree_sources_that_migrate_are_read_as_their_csi_drivers_volumes() {
        let spec = |source: serde_json::Value| -> core::PersistentVolumeSpec {
            serde_json::from_value(source).expect("a spec")
        };
        let ebs = migrated(&spec(
            json!({"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-123"}}),
        ));
        assert_eq!(
            ebs,
            Some(CsiVolume {
                driver: "ebs.csi.aws.com".into(),
                handle: "vol-123".into()
            })
        );
        let pd =
            migrated(&spec(json!({"gcePersistentDisk": {"pdName": "disk-1"}}))).expect("migrates");
        assert_eq!(pd.driver, "pd.csi.storage.gke.io");
        assert_eq!(
            migrated(&spec(json!({"hostPath": {"path": "/data"}}))),
            None
        );
    }

    #[test]
    fn inline_disks_are_named_as_volume_restrictions_compares_them() {
        let pod: core::Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {
        "containers": [],
        "volumes": [
            {"name": "a", "gcePersistentDisk": {"pdName": "foo", "readOnly": true}},
            {"name": "b", "awsElasticBlockStore": {"volumeID": "vol-1", "readOnly": true}},
            {"name": "c", "rbd": {"monitors": ["m1", "m2"], "image": "img"}},
            {"name": "d", "emptyDir": {}}
        ]}}))
        .expect("a pod");
        let disks = crate::translate::volumes::inline_disks(&pod);
        let got: Vec<(Vec<String>, bool)> =
            disks.into_iter().map(|d| (d.keys, d.read_only)).collect();
        assert_eq!(
            got,
            [
                (vec!["gce-pd:foo".to_string()], true),
                // An EBS volume is never shared, even read only.
                (vec!["aws-ebs:vol-1".to_string()], false),
                (
                    vec!["rbd:m1/rbd/img".to_string(), "rbd:m2/rbd/img".to_string()],
                    false
                ),
            ]
        );
        // And the EBS and PD volumes migrate to their CSI drivers.
        assert_eq!(migrated_inline(&pod).len(), 2);
    }
}
