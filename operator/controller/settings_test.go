package controller

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/torus-mpi/torus/api"
	"github.com/torus-mpi/torus/pkg/mpi"
)

// The operator's flags for its jobs' settings, each read into its field,
// and what no job could run under refused with the flag named.
func TestSettingsFlags(t *testing.T) {
	defaults := Settings{
		ClusterDomain: mpi.DefaultClusterDomain, MaxConcurrentReconciles: DefaultMaxConcurrentReconciles, MaxNodes: mpi.DefaultMaxNodes,
		JobSetReportTimeout: DefaultJobSetReportTimeout, SSHKeyAlgorithm: mpi.DefaultKeyAlgorithm, LaunchAgentDelivery: api.LaunchAgentAuto,
	}
	with := func(change func(*Settings)) Settings {
		s := defaults
		change(&s)
		return s
	}
	cases := map[string]struct {
		args    []string
		want    Settings
		wantErr string
	}{
		"none: the defaults": {want: defaults},
		"every flag": {
			args: []string{"--cluster-domain=example.org", "--max-concurrent-reconciles=3", "--max-nodes=64", "--jobset-report-timeout=5m",
				"--ssh-key-algorithm=rsa-3072", "--watch-pod-creation-failures=false", "--kueue-trainjob-integration",
				"--launch-image=torus:1", "--launcher-after-workers", "--launch-agent-delivery=init-container"},
			want: Settings{ClusterDomain: "example.org", MaxConcurrentReconciles: 3, MaxNodes: 64, JobSetReportTimeout: 5 * time.Minute,
				SSHKeyAlgorithm: mpi.KeyAlgorithm("rsa-3072"), IgnorePodCreationFailures: true, KueueTrainJobIntegration: true,
				LaunchImage: "torus:1", LauncherAfterWorkers: true, LaunchAgentDelivery: api.LaunchAgentByInitContainer},
		},
		"watching pod creation failures, said without a value": {args: []string{"--watch-pod-creation-failures"}, want: defaults},
		"watching pod creation failures, said so":              {args: []string{"--watch-pod-creation-failures=true"}, want: with(func(s *Settings) { s.IgnorePodCreationFailures = false })},
		"no nodes":                     {args: []string{"--max-nodes=0"}, wantErr: "set it between 1 and 65536"},
		"more nodes than Torus runs":   {args: []string{"--max-nodes=70000"}, wantErr: "set it between 1 and 65536"},
		"a key type Torus cannot make": {args: []string{"--ssh-key-algorithm=dsa"}, wantErr: "ssh-key-algorithm"},
		"a way the agent cannot come":  {args: []string{"--launch-agent-delivery=hostPath"}, wantErr: `--launch-agent-delivery="hostPath": set it to`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fs := pflag.NewFlagSet("operator", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var s Settings
			s.AddFlags(fs)
			err := fs.Parse(tc.args)
			if err == nil {
				err = s.Validate()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, s); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
		})
	}
}
