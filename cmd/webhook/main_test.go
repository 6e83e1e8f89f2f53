package main

import (
	"io"
	"testing"
)

// TestEnableHTTP2Flag: HTTP/2 is off unless --enable-http2 is given.
func TestEnableHTTP2Flag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--enable-http2"}, true},
		{[]string{"--enable-http2=false"}, false},
	} {
		fs, c := serveFlags(io.Discard)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if c.server.EnableHTTP2 != tc.want {
			t.Errorf("%q: EnableHTTP2 %v, want %v", tc.args, c.server.EnableHTTP2, tc.want)
		}
	}
}
