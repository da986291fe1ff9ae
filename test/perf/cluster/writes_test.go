package main

import "testing"

func TestServerWrites(t *testing.T) {
	before, err := parseServerWrites([]byte(`# TYPE apiserver_request_total counter
apiserver_request_total{code="201",dry_run="",resource="pods",subresource="",verb="POST"} 10
apiserver_request_total{code="200",dry_run="",resource="pods",subresource="status",verb="PATCH"} 4
`))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseServerWrites([]byte(`# TYPE apiserver_request_total counter
apiserver_request_total{code="201",dry_run="",resource="pods",subresource="",verb="POST"} 19
apiserver_request_total{code="409",dry_run="",resource="pods",subresource="",verb="POST"} 1
apiserver_request_total{code="404",dry_run="",resource="pods",subresource="",verb="DELETE"} 6
apiserver_request_total{code="201",dry_run="",resource="pods",subresource="binding",verb="POST"} 9
apiserver_request_total{code="200",dry_run="",resource="pods",subresource="status",verb="PATCH"} 4
apiserver_request_total{code="200",dry_run="",resource="trainjobs",subresource="status",verb="APPLY"} 3
apiserver_request_total{code="201",dry_run="All",resource="jobsets",subresource="",verb="POST"} 7
apiserver_request_total{code="200",dry_run="",resource="pods",subresource="",verb="LIST"} 50
apiserver_request_total{code="200",dry_run="",resource="pods",subresource="",verb="WATCH"} 5
`))
	if err != nil {
		t.Fatal(err)
	}
	d := after.minus(before)
	if got, want := d.String(), "pods POST 9, pods/binding POST 9, trainjobs/status APPLY 3"; got != want {
		t.Errorf("writes: got %q, want %q", got, want)
	}
	if d.total() != 21 {
		t.Errorf("total: got %.0f, want 21", d.total())
	}
}
