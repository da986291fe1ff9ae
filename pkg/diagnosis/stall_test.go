package diagnosis

import (
	"strings"
	"testing"
	"time"
)

// stamped prefixes each line as the kubelet does with timestamps=true, one
// second apart from start.
func stamped(start time.Time, lines ...string) string {
	var b strings.Builder
	for i, l := range lines {
		b.WriteString(start.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano))
		b.WriteString(" " + l + "\n")
	}
	return b.String()
}

func TestReadQuiet(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 13, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		log        string
		wantLast   time.Time
		wantReason string
		wantDetail string
	}{
		"a rank raised while the others wait": {
			log:      stamped(t0, "epoch 1 loss 0.9", "Traceback (most recent call last):", `  File "/opt/hang.py", line 9, in <module>`, "RuntimeError: rank 1 gives up"),
			wantLast: t0.Add(3 * time.Second), wantReason: ReasonPythonException, wantDetail: "a rank raised RuntimeError: rank 1 gives up",
		},
		"a rank out of GPU memory": {
			log:      stamped(t0, "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 16.00 GiB. GPU 0 has a total capacity of 139.80 GiB of which 10.56 GiB is free."),
			wantLast: t0, wantReason: ReasonCUDAOutOfMemory, wantDetail: "rank 1 ran out of GPU memory: it asked for 16.00 GiB more on GPU 0, which had 10.56 GiB free of 139.80 GiB",
		},
		"a healthy training": {
			log:      stamped(t0, "epoch 1 loss 0.9", "epoch 2 loss 0.7"),
			wantLast: t0.Add(time.Second),
		},
		"a library's warning alone is no failure": {
			log:      stamped(t0, "host:41:41 [0] NCCL WARN Could not find real path of /sys/class/net/eth9", "epoch 1 loss 0.9"),
			wantLast: t0.Add(time.Second),
		},
		"the first line cut by the read's byte limit": {
			log:      "loss 0.5\n" + stamped(t0, "epoch 2 loss 0.7"),
			wantLast: t0,
		},
		"nothing printed yet": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q := ReadQuiet(tc.log, "train")
			if !q.LastOutput.Equal(tc.wantLast) || q.Reason != tc.wantReason || q.Detail != tc.wantDetail {
				t.Errorf("got %v %q %q; want %v %q %q", q.LastOutput, q.Reason, q.Detail, tc.wantLast, tc.wantReason, tc.wantDetail)
			}
			if q.Reason != "" && (q.Fix == "" || len(q.Output) == 0) {
				t.Errorf("a failure without a fix or a quote: %+v", q)
			}
		})
	}
}
