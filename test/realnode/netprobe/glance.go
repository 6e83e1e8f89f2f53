package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/c5c3/glance-operator/test/glanceclient"
)

// glanceFlags are how a client finds Glance and its Keystone, and whom it
// authenticates as.
type glanceFlags struct {
	api, keystone, user, password, project string
	size                                   int
	// sized uploads with a Content-Length, so glance_store knows the size
	// and goes multipart above the store's largeObjectSize.
	sized bool
	// image and sha256, when set, make glance only download that image and
	// compare.
	image, sha256 string
}

func (f *glanceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.api, "api", "", "Glance's endpoint, e.g. http://glance.NS.svc:9292")
	fs.StringVar(&f.keystone, "keystone", "", "Keystone's v3 endpoint")
	fs.StringVar(&f.user, "user", "demo", "the user to authenticate as")
	fs.StringVar(&f.password, "password", "", "the user's password")
	fs.StringVar(&f.project, "project", "demo", "the user's project")
	fs.IntVar(&f.size, "size", 256<<10, "bytes of each uploaded image")
	fs.BoolVar(&f.sized, "sized", false, "upload with a Content-Length rather than chunked")
	fs.StringVar(&f.image, "image", "", "glance: download this image only")
	fs.StringVar(&f.sha256, "sha256", "", "glance: the sha256 -image must have")
}

// client authenticates and returns a Glance client. Every request opens
// its own connection, so each one is routed through the Service afresh, as
// a fleet of clients would be.
func (f *glanceFlags) client() (*glanceclient.Client, error) {
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	token, err := glanceclient.KeystoneToken(hc, f.keystone, f.user, f.password, f.project)
	if err != nil {
		return nil, err
	}
	return &glanceclient.Client{HTTP: hc, Base: f.api, Token: token}, nil
}

// roundTrip is the serve story: create an image, upload it, find it in the
// list, download it and compare; it prints the result as JSON.
func roundTrip(f glanceFlags) error {
	c, err := f.client()
	if err != nil {
		return err
	}
	if f.image != "" {
		got, n, err := c.Download(f.image)
		if err != nil {
			return err
		}
		out, _ := json.Marshal(map[string]any{"id": f.image, "sha256": f.sha256, "downloadedSHA256": got, "downloadedSize": n, "listed": true, "size": n})
		fmt.Printf("result %s\n", out)
		if got != f.sha256 {
			return fmt.Errorf("image %s: downloaded %d bytes with sha256 %s, want %s", f.image, n, got, f.sha256)
		}
		return nil
	}
	name := "round-trip-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	img, sum, err := uploadImage(c, name, f.size, f.sized)
	if err != nil {
		return err
	}
	listed, err := listed(c, name, img)
	if err != nil {
		return err
	}
	got, n, err := c.Download(img)
	if err != nil {
		return err
	}
	out, _ := json.Marshal(map[string]any{"id": img, "sha256": sum, "size": f.size, "listed": listed, "downloadedSHA256": got, "downloadedSize": n})
	fmt.Printf("result %s\n", out)
	if !listed || got != sum || n != int64(f.size) {
		return fmt.Errorf("image %s: listed %v, downloaded %d bytes with sha256 %s, want %d bytes with %s", img, listed, n, got, f.size, sum)
	}
	return nil
}

// uploadImage creates an image and uploads size random bytes into the
// default store, chunked or, when sized, with a Content-Length; it returns
// the image's ID and the data's sha256.
func uploadImage(c *glanceclient.Client, name string, size int, sized bool) (string, string, error) {
	var img struct {
		ID string `json:"id"`
	}
	resp, err := c.JSON(http.MethodPost, "/v2/images", map[string]any{"name": name, "disk_format": "raw", "container_format": "bare"}, &img)
	if err != nil {
		return "", "", err
	}
	if resp.Code != http.StatusCreated {
		return "", "", fmt.Errorf("create image: %s", resp)
	}
	data := make([]byte, size)
	_, _ = rand.Read(data)
	sum := sha256.Sum256(data)
	upload := c.Upload
	if sized {
		upload = c.UploadSized
	}
	if resp, err = upload(img.ID, "", data); err != nil {
		return img.ID, "", err
	}
	if resp.Code != http.StatusNoContent {
		return img.ID, "", fmt.Errorf("upload of image %s: %s", img.ID, resp)
	}
	return img.ID, hex.EncodeToString(sum[:]), nil
}

// listed reports whether the list of the images named name holds id.
func listed(c *glanceclient.Client, name, id string) (bool, error) {
	var list struct {
		Images []struct {
			ID string `json:"id"`
		} `json:"images"`
	}
	resp, err := c.JSON(http.MethodGet, "/v2/images?name="+url.QueryEscape(name), nil, &list)
	if err != nil {
		return false, err
	}
	if resp.Code != http.StatusOK {
		return false, fmt.Errorf("list images: %s", resp)
	}
	return slices.ContainsFunc(list.Images, func(i struct {
		ID string `json:"id"`
	}) bool {
		return i.ID == id
	}), nil
}

// traffic sends list, download and upload requests through Glance's
// Service without pause until SIGTERM, and serves what happened on addr:
// GET /stats?from=RFC3339Nano&to=RFC3339Nano counts the requests started in
// that window, the failures with their errors, and the latency quantiles.
func traffic(f glanceFlags, addr string, workers int) error {
	c, err := f.client()
	if err != nil {
		return err
	}
	// A seed image every download reads.
	seed, seedSum, err := uploadImage(c, "traffic-seed", f.size, false)
	if err != nil {
		return fmt.Errorf("seed image: %w", err)
	}
	var mu sync.Mutex
	var samples []glanceclient.Sample
	// running are the start times of the requests in flight, by worker.
	running := make([]time.Time, workers)
	begin := func(w int) time.Time {
		now := time.Now()
		mu.Lock()
		running[w] = now
		mu.Unlock()
		return now
	}
	record := func(w int, op string, start time.Time, err error) {
		s := glanceclient.Sample{At: start, Op: op, Dur: time.Since(start)}
		if err != nil {
			s.Err = err.Error()
		}
		mu.Lock()
		samples = append(samples, s)
		running[w] = time.Time{}
		mu.Unlock()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				start := begin(w)
				switch i % 3 {
				case 0:
					ok, err := listed(c, "traffic-seed", seed)
					if err == nil && !ok {
						err = errors.New("the seed image is not listed")
					}
					record(w, "list", start, err)
				case 1:
					sum, n, err := c.Download(seed)
					if err == nil && (sum != seedSum || n != int64(f.size)) {
						err = fmt.Errorf("downloaded %d bytes with sha256 %s, want %d with %s", n, sum, f.size, seedSum)
					}
					record(w, "download", start, err)
				case 2:
					_, _, err := uploadImage(c, "traffic-"+strconv.Itoa(w), f.size, false)
					record(w, "upload", start, err)
				}
			}
		})
	}
	http.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		from, _ := time.Parse(time.RFC3339Nano, r.URL.Query().Get("from"))
		to, err := time.Parse(time.RFC3339Nano, r.URL.Query().Get("to"))
		if err != nil {
			to = time.Now()
		}
		mu.Lock()
		window := make([]glanceclient.Sample, 0, len(samples))
		for _, s := range samples {
			if !s.At.Before(from) && s.At.Before(to) {
				window = append(window, s)
			}
		}
		pending := 0
		for _, at := range running {
			if !at.IsZero() && !at.Before(from) && at.Before(to) {
				pending++
			}
		}
		mu.Unlock()
		st := glanceclient.Summarize(window)
		st.Pending = pending
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.ListenAndServe() }()
	fmt.Println("traffic: seed image", seed, "; stats on", addr)
	<-ctx.Done()
	wg.Wait()
	return srv.Close()
}
