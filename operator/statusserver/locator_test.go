package statusserver

import (
	"strings"
	"testing"
)

func TestParseRefs(t *testing.T) {
	services := []struct {
		in, err string
		want    ServiceRef
	}{
		{in: "torus-operator-service:443", want: ServiceRef{Name: "torus-operator-service", Port: 443}},
		{in: "torus-operator-service", err: "write NAME:PORT"},
		{in: "torus-operator-service:https", err: "write NAME:PORT"},
		{in: "torus-operator-service:0", err: "write NAME:PORT"},
		{in: "Torus:443", err: "write NAME:PORT"},
	}
	for _, tt := range services {
		got, err := ParseServiceRef(tt.in)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ParseServiceRef(%q) = %v, %v; want an error saying %q", tt.in, got, err, tt.err)
		case tt.err == "" && (err != nil || *got != tt.want):
			t.Errorf("ParseServiceRef(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	secrets := []struct {
		in, err string
		want    SecretKeyRef
	}{
		{in: "torus-operator-service-cert:olmCAKey", want: SecretKeyRef{Name: "torus-operator-service-cert", Key: "olmCAKey"}},
		{in: "webhook-cert:ca.crt", want: SecretKeyRef{Name: "webhook-cert", Key: "ca.crt"}},
		{in: "webhook-cert", err: "write NAME:KEY"},
		{in: "webhook-cert:a/b", err: "write NAME:KEY"},
		{in: ":ca.crt", err: "write NAME:KEY"},
	}
	for _, tt := range secrets {
		got, err := ParseSecretKeyRef(tt.in)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ParseSecretKeyRef(%q) = %v, %v; want an error saying %q", tt.in, got, err, tt.err)
		case tt.err == "" && (err != nil || *got != tt.want):
			t.Errorf("ParseSecretKeyRef(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}
