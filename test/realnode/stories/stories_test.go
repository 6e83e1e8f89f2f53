package stories

import "testing"

// The stories share three scenes, told at the same time: a scene takes
// over a minute to set and the node has two cores, so each scene carries
// the stories that can start where another ended. A fourth scene, for the
// jump to Glance 33, shortened the suite by a minute but starved the
// node: requests took 20 s, and rolls cut them. The eventlet and uWSGI
// scenes are the operator upgrade's (setUp): set under the release it
// starts from, carried through it, and ready when the tests begin.

// TestEventletScene: a 2025.2 Glance (eventlet) serves; glance-direct
// imports cross its two pods; a roll loses a staged image, as a second
// store is attached; images are copied to that store; then it upgrades to
// 2026.1 (uWSGI) under traffic.
func TestEventletScene(t *testing.T) {
	t.Parallel()
	s := upgradedScene(t, "2025.2")
	tell(t, story{"serve", s.serve}, story{"glance-direct", s.glanceDirect}, story{"staged-data-lost", s.stagedDataLost},
		story{"copy-image", s.copyImage}, story{"upgrade-to-uwsgi", s.upgradeToUWSGI})
}

// TestUWSGIScene: a 2026.1 Glance (uWSGI) serves; glance-direct imports
// cross its two pods; its passwords rotate under traffic; it jumps to
// Glance 33 under the same traffic.
func TestUWSGIScene(t *testing.T) {
	t.Parallel()
	s := upgradedScene(t, "2026.1")
	tell(t, story{"serve", s.serve}, story{"glance-direct", s.glanceDirect}, story{"rotation", s.rotate},
		story{"jump-to-glance-33", s.jumpToGlance33})
}

// TestImageCacheScene: a 2026.1 Glance with an image cache serves from its
// cache and is evicted past the cache's bound; its store moves to the S3
// server's HTTPS port with a CA of the scene's; then the leading manager
// fails over and scales it to three replicas.
func TestImageCacheScene(t *testing.T) {
	t.Parallel()
	s := newScene(t, "2026.1", withImageCache)
	tell(t, story{"image-cache", s.imageCache}, story{"s3-tls", s.s3TLS}, story{"failover", s.failover})
}
