package supervisor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Poll calls check every 100 ms until it returns nil or timeout passes;
// the error then says what the last check found. A check that returns
// Fatal(err) ends the wait at once with err.
func Poll(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		var f fatal
		if errors.As(err, &f) {
			return f.err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Fatal marks an error that no later check can mend (the component
// waited for has exited): Poll returns it at once.
func Fatal(err error) error { return fatal{err} }

type fatal struct{ err error }

func (f fatal) Error() string { return f.err.Error() }

// HTTPGet succeeds when url answers 200. pool verifies an HTTPS server;
// a non-empty token is sent as a bearer token.
func HTTPGet(ctx context.Context, url string, pool *x509.CertPool, token string) error {
	hc := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true},
		Timeout:   5 * time.Second,
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}
