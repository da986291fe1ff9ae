// Command catalog-server serves a file-based operator catalog over OLM's
// registry gRPC API on 127.0.0.1 only. `opm serve` does the same on every
// address of the machine; the OLM end-to-end suite must not open a port
// beyond loopback, so it runs this instead, built from the same
// operator-registry packages opm uses.
//
//	catalog-server -catalog DIR -listen 127.0.0.1:50051
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	health "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/operator-framework/operator-registry/pkg/api"
	"github.com/operator-framework/operator-registry/pkg/cache"
	"github.com/operator-framework/operator-registry/pkg/server"
)

func main() {
	catalog := flag.String("catalog", "", "directory of the file-based catalog")
	listen := flag.String("listen", "127.0.0.1:50051", "loopback address to serve on")
	flag.Parse()
	if err := run(*catalog, *listen); err != nil {
		fmt.Fprintln(os.Stderr, "catalog-server:", err)
		os.Exit(1)
	}
}

func run(catalog, listen string) error {
	if catalog == "" {
		return fmt.Errorf("-catalog is required")
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("parsing -listen %q: %w", listen, err)
	}
	// Refuse anything but loopback: the catalog is for this machine's
	// test cluster only.
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-listen %q: only a loopback IP address is allowed", listen)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cacheDir, err := os.MkdirTemp("", "catalog-server-cache-")
	if err != nil {
		return fmt.Errorf("creating the cache directory: %w", err)
	}
	defer os.RemoveAll(cacheDir)
	log := logrus.NewEntry(logrus.New())
	store, err := cache.New(cacheDir, cache.WithLog(log))
	if err != nil {
		return fmt.Errorf("creating the catalog cache: %w", err)
	}
	defer store.Close()
	if err := cache.LoadOrRebuild(ctx, store, os.DirFS(catalog)); err != nil {
		return fmt.Errorf("loading catalog %s: %w", catalog, err)
	}

	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", listen, err)
	}
	srv := grpc.NewServer()
	api.RegisterRegistryServer(srv, server.NewRegistryServer(store))
	health.RegisterHealthServer(srv, server.NewHealthServer())
	go func() {
		<-ctx.Done()
		srv.GracefulStop()
	}()
	log.WithField("address", lis.Addr().String()).WithField("catalog", catalog).Info("serving catalog")
	return srv.Serve(lis)
}
