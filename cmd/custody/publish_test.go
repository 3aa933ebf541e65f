package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/custodylog/custody/internal/s3proc"
)

// TestExportS3Audit publishes the demo log to versitygw with custody
// export, audits it over plain HTTP GETs from the bucket, then tampers
// with one stored object: the audit names it and exits 4, and a new
// publication (after the checkpoint is lost) refuses to overwrite it.
func TestExportS3Audit(t *testing.T) {
	g := s3proc.ForTest(t, "logs")
	dir := demoLedger(t)
	vkey := strings.TrimSpace(must(t, 0, "checkpoint", "--dir", dir, "--verifier-key").stdout)
	r := must(t, 0, "export", "--dir", dir, "--tiles", "s3://logs/demo/log", "--json")
	var res struct {
		Size    uint64 `json:"size"`
		Written int    `json:"objects_written"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Size != 12 || res.Written != 3 {
		t.Fatalf("export to the bucket: %v %s", err, r.stdout)
	}
	// Again: nothing to do.
	if r := must(t, 0, "export", "--dir", dir, "--tiles", "s3://logs/demo/log"); !strings.Contains(r.stdout, "0 objects written") {
		t.Fatalf("second export: %s", r.stdout)
	}
	base := g.URL + "/logs/demo/log"
	r = must(t, 0, "audit", "--tiles", base, "--log-key", vkey)
	if !strings.Contains(r.stdout, "CLEAN") {
		t.Fatalf("audit of the bucket: %s", r.stdout)
	}

	// A tlog-proof of an entry, checked against the published log: the
	// bucket's checkpoint extends the proof's. Another log's bucket does
	// not verify: invalid, exit 4.
	proof := filepath.Join(t.TempDir(), "e5.tlog-proof")
	must(t, 0, "prove", "--dir", dir, "--index", "5", "--format", "tlog-proof", "--out", proof)
	r = must(t, 0, "verify", proof, "--log-key", vkey, "--tiles", base)
	if !strings.Contains(r.stdout, "published") {
		t.Fatalf("verify --tiles: %s", r.stdout)
	}
	other := demoLedger(t)
	must(t, 0, "export", "--dir", other, "--tiles", "s3://logs/other")
	r = must(t, 4, "verify", proof, "--log-key", vkey, "--tiles", g.URL+"/logs/other", "--json")
	if !strings.Contains(r.stdout, `"published"`) {
		t.Fatalf("verify --tiles of another log's bucket: %s", r.stdout)
	}

	// Someone with write access to the bucket changes one byte of one
	// leaf of the entry bundle.
	key := "demo/log/tile/entries/000.p/12"
	data, err := httpGetBytes(base + "/tile/entries/000.p/12")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(`"logged_at"`))
	data[i+2] ^= 0x20
	if _, err := g.Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("logs"), Key: &key, Body: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	r = must(t, 4, "audit", "--tiles", base, "--log-key", vkey)
	if !strings.Contains(r.stdout, "FINDING") || !strings.Contains(r.stdout, "tile/0/000.p/12") {
		t.Fatalf("audit of a tampered bucket: %s", r.stdout)
	}
	// The checkpoint is lost: the next publication starts from nothing,
	// finds the tampered bundle, and stops with an alarm before writing a
	// checkpoint, the bundle left as it is.
	if _, err := g.Client().DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String("logs"), Key: aws.String("demo/log/checkpoint")}); err != nil {
		t.Fatal(err)
	}
	r = custody(t, "", "export", "--dir", dir, "--tiles", "s3://logs/demo/log")
	if r.code == 0 || !strings.Contains(r.stderr, "ALARM") || !strings.Contains(r.stderr, "tile/entries/000.p/12") {
		t.Fatalf("export over a tampered bundle: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got, _ := httpGetBytes(base + "/tile/entries/000.p/12"); !bytes.Equal(got, data) {
		t.Fatal("the tampered bundle was overwritten")
	}
	if _, err := httpGetBytes(base + "/checkpoint"); err == nil {
		t.Fatal("a checkpoint was published over a bundle that is not the log's")
	}

	// Usage errors name the input.
	if r := custody(t, "", "serve", "--dir", dir, "--publish", "gs://x/y"); r.code != 2 || !strings.Contains(r.stderr, "s3://BUCKET/PREFIX") {
		t.Fatalf("serve --publish gs://: exit %d %s", r.code, r.stderr)
	}
}

// TestServePublish runs custody serve --publish under an authorised-append
// load (bench serve), waits for /metrics to show no lag, and audits the
// bucket over HTTP.
func TestServePublish(t *testing.T) {
	g := s3proc.ForTest(t, "logs")
	data := filepath.Join(t.TempDir(), "data")
	must(t, 0, "init", "--dir", data, "--origin", "example.com/custody")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runIO(ctx, []string{"custody", "serve", "--dir", data, "--addr", "127.0.0.1:0", "--log-format", "json",
			"--publish", "s3://logs/served"}, strings.NewReader(""), &stdout, &stderr)
	}()
	addr := regexp.MustCompile(`"addr":"(127\.0\.0\.1:\d+)"`)
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := addr.FindStringSubmatch(stderr.String()); m != nil {
			url = "http://" + m[1]
		}
	}
	if url == "" {
		t.Fatalf("the server did not start: %s", stderr.String())
	}
	must(t, 0, "bench", "serve", "--ledger", url, "--admin-key", filepath.Join(data, "keys", "admin.key"),
		"--clients", "4", "--duration", "500ms")
	var size, published, lag float64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		m := metrics(t, url)
		size, published, lag = m["custody_tree_size"], m["custody_publish_size"], m["custody_publish_lag_entries"]
		if size > 0 && published == size && lag == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: tree %v, published %v, lag %v\n%s", size, published, lag, stderr.String())
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d: %s", code, stderr.String())
	}
	vkey := strings.TrimSpace(must(t, 0, "checkpoint", "--dir", data, "--verifier-key").stdout)
	r := must(t, 0, "audit", "--tiles", g.URL+"/logs/served", "--log-key", vkey, "--json")
	if !strings.Contains(r.stdout, `"checkpoint_size": `+strconv.Itoa(int(size))) {
		t.Fatalf("audit of the published bucket (size %v): %s", size, r.stdout)
	}
}

func httpGetBytes(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, &httpStatusError{url, resp.Status}
	}
	return io.ReadAll(resp.Body)
}

type httpStatusError struct{ url, status string }

func (e *httpStatusError) Error() string { return e.url + ": " + e.status }

// metrics reads the unlabelled samples of a server's /metrics.
func metrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	data, err := httpGetBytes(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = v
		}
	}
	return out
}
