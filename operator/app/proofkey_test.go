package app

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestProofKeysOf(t *testing.T) {
	made := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	key := func(b byte) []byte { return bytes.Repeat([]byte{b}, minProofKeyLength) }
	tests := map[string]struct {
		data        map[string][]byte
		wantRetired [][]byte
		wantErr     string
	}{
		"the current key alone": {data: map[string][]byte{"key": key(1)}},
		"retired keys, in their fields' order": {
			data:        map[string][]byte{"key": key(1), "retired-2": key(3), "retired-1": key(2), "note": []byte("not a key")},
			wantRetired: [][]byte{key(2), key(3)},
		},
		"no current key":       {data: map[string][]byte{"retired-1": key(2)}, wantErr: `no proof key of 32 bytes or more in "key"`},
		"a short current key":  {data: map[string][]byte{"key": []byte("short")}, wantErr: `no proof key of 32 bytes or more in "key"`},
		"a short retired key":  {data: map[string][]byte{"key": key(1), "retired-1": []byte("short")}, wantErr: `retired proof key "retired-1" is shorter than 32 bytes`},
		"an empty retired key": {data: map[string][]byte{"key": key(1), "retired-1": nil}, wantErr: `retired proof key "retired-1"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "torus-system", Name: ProofKeySecret, CreationTimestamp: metav1.NewTime(made)}, Data: tc.data}
			got, err := proofKeysOf(s)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !bytes.Equal(got.Current, tc.data["key"]) || !got.Since.Equal(made) {
				t.Errorf("current key %x since %s, want %x since %s", got.Current, got.Since, tc.data["key"], made)
			}
			if len(got.Retired) != len(tc.wantRetired) {
				t.Fatalf("retired keys: %d, want %d", len(got.Retired), len(tc.wantRetired))
			}
			for i := range got.Retired {
				if !bytes.Equal(got.Retired[i], tc.wantRetired[i]) {
					t.Errorf("retired key %d = %x, want %x", i, got.Retired[i], tc.wantRetired[i])
				}
			}
		})
	}
}
