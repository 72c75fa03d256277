//! The volume writes before a Binding, as kube-scheduler's VolumeBinding
//! plugin makes them in pre-bind: a chosen volume's `claimRef` set to its
//! claim, or the claim marked for provisioning on the chosen node; then
//! the PV controller (or a provisioner) completes the binding, which is
//! read back until it has.

use dragon_framework::volumes::VolumeBinding;
use dragon_framework::{ApiError, ApiErrorKind};
use k8s_openapi::api::core::v1 as core;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{KubeIo, object, typed};
use crate::cluster_io::ClaimProgress;
use crate::translate::volumes::{BIND_COMPLETED, BOUND_BY_CONTROLLER, SELECTED_NODE};

impl KubeIo {
    fn claims(&self, namespace: &str) -> Api<core::PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), namespace)
    }

    pub(super) async fn write_volume_binding(
        &self,
        claim: &str,
        binding: &VolumeBinding,
    ) -> Result<(), ApiError> {
        let key = object(claim)?;
        let (ns, name) = (key.namespace(), key.name());
        match binding {
            VolumeBinding::Volume(volume) => {
                self.request_token().await;
                let pvc =
                    self.claims(ns).get(name).await.map_err(|e| {
                        typed(&format!("reading persistentvolumeclaim {claim}"), &e)
                    })?;
                let volumes: Api<core::PersistentVolume> = Api::all(self.client.clone());
                self.request_token().await;
                let mut pv = volumes
                    .get(volume)
                    .await
                    .map_err(|e| typed(&format!("reading persistentvolume {volume}"), &e))?;
                let spec = pv.spec.get_or_insert_with(Default::default);
                let uid = pvc.metadata.uid.clone();
                if let Some(r) = &spec.claim_ref
                    && r.namespace.as_deref() == Some(ns)
                    && r.name.as_deref() == Some(name)
                    && (r.uid.is_none() || r.uid == uid)
                {
                    // Pre-bound to this claim already: the PV controller
                    // binds it.
                    return Ok(());
                }
                if let Some(r) = &spec.claim_ref {
                    // Taken by another claim since the snapshot saw it.
                    return Err(ApiError::new(
                        ApiErrorKind::Conflict,
                        format!(
                            "persistentvolume {volume} is already bound to {}/{}, not {claim}",
                            r.namespace.as_deref().unwrap_or(""),
                            r.name.as_deref().unwrap_or("")
                        ),
                    ));
                }
                spec.claim_ref = Some(core::ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("PersistentVolumeClaim".into()),
                    namespace: Some(ns.into()),
                    name: Some(name.into()),
                    uid,
                    resource_version: pvc.metadata.resource_version.clone(),
                    ..Default::default()
                });
                pv.metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .entry(BOUND_BY_CONTROLLER.into())
                    .or_insert_with(|| "yes".into());
                // A replace carries the volume's resourceVersion: a volume
                // another binder took meanwhile is a conflict, not stolen.
                self.request_token().await;
                volumes
                    .replace(volume, &PostParams::default(), &pv)
                    .await
                    .map_err(|e| {
                        typed(&format!("binding persistentvolume {volume} to {claim}"), &e)
                    })?;
            }
            VolumeBinding::Provision(node) => {
                let patch = json!({"metadata": {"annotations": {SELECTED_NODE: node}}});
                self.request_token().await;
                self.claims(ns)
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|e| {
                        typed(&format!("asking to provision {claim} on node {node}"), &e)
                    })?;
            }
        }
        Ok(())
    }

    pub(super) async fn read_claim_progress(
        &self,
        claim: &str,
        binding: &VolumeBinding,
    ) -> Result<ClaimProgress, ApiError> {
        let key = object(claim)?;
        self.request_token().await;
        let pvc = self
            .claims(key.namespace())
            .get(key.name())
            .await
            .map_err(|e| typed(&format!("reading persistentvolumeclaim {claim}"), &e))?;
        let annotations = pvc.metadata.annotations.unwrap_or_default();
        let bound = pvc
            .spec
            .and_then(|s| s.volume_name)
            .is_some_and(|v| !v.is_empty())
            && annotations.contains_key(BIND_COMPLETED);
        if bound {
            return Ok(ClaimProgress::Bound);
        }
        // A provisioner that fails takes the node back off the claim.
        if let VolumeBinding::Provision(node) = binding
            && annotations.get(SELECTED_NODE) != Some(node)
        {
            return Err(ApiError::new(
                ApiErrorKind::Conflict,
                format!(
                    "provisioning failed for persistentvolumeclaim {claim}: the selected node was taken off"
                ),
            ));
        }
        Ok(ClaimProgress::Binding)
    }
}
