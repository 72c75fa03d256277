// The Kubeflow training-operator's controllers (TFJob, PyTorchJob, MPIJob
// and the rest), built from github.com/kubeflow/training-operator at a
// pinned release, with a main of this module's own: the release's main
// also serves validating webhooks, on every interface and with a
// certificate it rotates in a Secret, which a control plane whose servers
// listen on 127.0.0.1 only cannot host. The webhooks only validate job
// specs; the reconcilers here are the release's, unchanged, so the pods,
// Services and PodGroups a job gets are the ones a cluster gets.
package main

import (
	"flag"
	"net/http"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	schedulerpluginsv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"github.com/kubeflow/training-operator/pkg/config"
	controllerv1 "github.com/kubeflow/training-operator/pkg/controller.v1"
	"github.com/kubeflow/training-operator/pkg/controller.v1/common"
)

func main() {
	var probeAddr, gangSchedulerName, schemes string
	flag.StringVar(&probeAddr, "health-probe-bind-address", "127.0.0.1:0", "where /healthz and /readyz listen")
	flag.StringVar(&gangSchedulerName, "gang-scheduler-name", "", "scheduler-plugins: a PodGroup per job (as the release's flag)")
	flag.StringVar(&schemes, "enable-scheme", "tfjob,pytorchjob,mpijob", "comma-separated job kinds to reconcile")
	// The release's defaults (its main sets them through flags).
	config.Config.PyTorchInitContainerImage = config.PyTorchInitContainerImageDefault
	config.Config.PyTorchInitContainerTemplateFile = config.PyTorchInitContainerTemplateFileDefault
	config.Config.PyTorchInitContainerMaxTries = config.PyTorchInitContainerMaxTriesDefault
	config.Config.MPIKubectlDeliveryImage = config.MPIKubectlDeliveryImageDefault
	opts := zap.Options{Development: true}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kubeflowv1.AddToScheme(scheme))
	utilruntime.Must(schedulerpluginsv1alpha1.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: probeAddr,
	})
	if err != nil {
		log.Error(err, "unable to create the manager")
		os.Exit(1)
	}
	gang := common.GenNonGangSchedulerSetupFunc()
	if gangSchedulerName != "" {
		gang = common.GenSchedulerPluginsSetupFunc(mgr.GetClient(), gangSchedulerName)
	}
	// Kinds as the release's --enable-scheme takes them (case-insensitive).
	var enabled controllerv1.EnabledSchemes
	for _, s := range strings.Split(schemes, ",") {
		if err := enabled.Set(strings.ToLower(strings.TrimSpace(s))); err != nil {
			log.Error(err, "unsupported scheme", "scheme", s)
			os.Exit(1)
		}
	}
	for _, s := range enabled {
		setup := controllerv1.SupportedSchemeReconciler[s]
		if err := setup(mgr, gang, 1); err != nil {
			log.Error(err, "unable to set up the controller", "scheme", s)
			os.Exit(1)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", func(_ *http.Request) error { return nil }); err != nil {
		os.Exit(1)
	}
	log.Info("starting the training-operator controllers", "schemes", schemes)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "the manager stopped")
		os.Exit(1)
	}
}
