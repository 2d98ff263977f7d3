// Command orqest-sandbox-plugin-kubernetes is the Kubernetes backend: each
// session is a hardened Pod running the agent runtime, spoken to with MCP
// over `attach` through the API server. The host launches it as a
// go-plugin over gRPC; run by hand it says so and exits.
package main

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/klog/v2"

	"github.com/orqest/sandbox/plugins/kubernetes"
	"github.com/orqest/sandbox/shared/plugin"
)

func main() {
	logger := plugin.NewPluginLogger("kubernetes")
	// client-go reports through klog, to stderr by default: send its
	// lines through the plugin's logger instead.
	klog.LogToStderr(false)
	klog.SetOutput(logger.Named("client-go").StandardWriter(&hclog.StandardLoggerOptions{InferLevels: true}))
	b := kubernetes.NewBackend(logger)
	plugin.Serve(b, plugin.WithLogger(logger))
	// The host closed the plugin: delete its pods and its Lease now (a
	// plugin killed instead leaves them to the next plugin's reaper).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b.Shutdown(ctx)
}
