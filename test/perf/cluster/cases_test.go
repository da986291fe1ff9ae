package main

import (
	"slices"
	"testing"
)

func TestParseHosts(t *testing.T) {
	cases := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "2,4,8,16,32,64,128,max", want: []int{2, 4, 8, 16, 32, 64, 128, hostsMax}},
		{in: "max", want: []int{hostsMax}},
		{in: "2, 100", want: []int{2, 100}},
		{in: "4,2", wantErr: true},
		{in: "2,2", wantErr: true},
		{in: "max,2", wantErr: true},
		{in: "2,max,max", wantErr: true},
		{in: "0", wantErr: true},
		{in: "some", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tc := range cases {
		got, err := parseHosts(tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) && !tc.wantErr {
			t.Errorf("parseHosts(%q) = %v, %v; want %v (error: %t)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseMPICases(t *testing.T) {
	cases := []struct {
		in      string
		want    []mpiCase
		wantErr bool
	}{
		{in: "1024,4096,200x8", want: []mpiCase{{1, 1024}, {1, 4096}, {200, 8}}},
		{in: " 8 ", want: []mpiCase{{1, 8}}},
		{in: "0", wantErr: true},
		{in: "16385", wantErr: true},
		{in: "200x", wantErr: true},
		{in: "x8", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tc := range cases {
		got, err := parseMPICases(tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) && !tc.wantErr {
			t.Errorf("parseMPICases(%q) = %v, %v; want %v (error: %t)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestCasesString(t *testing.T) {
	if got, want := casesString([]mpiCase{{1, 1024}, {200, 8}}), "1024,200x8"; got != want {
		t.Errorf("casesString = %q, want %q", got, want)
	}
}
