// Package s3proc runs a real S3-compatible server on loopback for tests
// and benchmarks: versitygw (github.com/versity/versitygw) with its POSIX
// backend in a folder, built from the Go module proxy by scripts/s3.sh
// into .cache/bin. Nothing here answers for S3: the Gateway is
// versitygw's own binary.
package s3proc

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/custodylog/custody/internal/testenv"
)

// A Gateway is a versitygw process on loopback.
type Gateway struct {
	URL            string // http://127.0.0.1:PORT
	Access, Secret string // its root account
	Dir            string // the POSIX backend's folder: DIR/BUCKET/KEY

	cmd    *exec.Cmd
	out    *os.File
	exited chan struct{}
}

// DefaultBin is the folder scripts/s3.sh builds into: $CUSTODY_S3_BIN,
// else <repository root>/.cache/bin.
func DefaultBin() string {
	if d := os.Getenv("CUSTODY_S3_BIN"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", ".cache", "bin")
}

// Missing returns an error when versitygw is not in bin.
func Missing(bin string) error {
	if _, err := os.Stat(filepath.Join(bin, "versitygw")); err != nil {
		return fmt.Errorf("versitygw missing in %s: run scripts/s3.sh", bin)
	}
	return nil
}

// Start runs versitygw from bin with its POSIX backend in dir/data, on a
// free loopback port, and waits until it answers.
func Start(bin, dir string) (*Gateway, error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	g := &Gateway{URL: "http://" + addr, Access: "custodytest", Secret: "custodytest-secret-key", Dir: data}
	g.out, err = os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return nil, err
	}
	g.cmd = exec.Command(filepath.Join(bin, "versitygw"), "--access", g.Access, "--secret", g.Secret,
		"--port", addr, "--quiet", "posix", data)
	g.cmd.Stdout, g.cmd.Stderr = g.out, g.out
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := g.cmd.Start(); err != nil {
		g.out.Close()
		return nil, fmt.Errorf("starting versitygw: %w", err)
	}
	exited := make(chan struct{})
	g.exited = exited
	go func() { g.cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(g.URL + "/")
		if err == nil {
			resp.Body.Close()
			return g, nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(g.out.Name())
			g.out.Close()
			return nil, fmt.Errorf("versitygw exited at start: %s", strings.TrimSpace(string(log)))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			g.Close()
			return nil, fmt.Errorf("versitygw did not answer on %s within 20s", addr)
		}
	}
}

// Close stops the gateway.
func (g *Gateway) Close() {
	if g.cmd != nil && g.cmd.Process != nil {
		g.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.exited:
		case <-time.After(5 * time.Second):
			g.cmd.Process.Kill()
			<-g.exited
		}
	}
	if g.out != nil {
		g.out.Close()
	}
}

// Env is the AWS environment that points the SDK at the gateway.
func (g *Gateway) Env() map[string]string {
	return map[string]string{"AWS_ACCESS_KEY_ID": g.Access, "AWS_SECRET_ACCESS_KEY": g.Secret,
		"AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL_S3": g.URL,
		// Keep the SDK away from the developer's own ~/.aws.
		"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull, "AWS_PROFILE": "",
		"AWS_EC2_METADATA_DISABLED": "true"}
}

// Client is an S3 client of the gateway's root account.
func (g *Gateway) Client() *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(g.URL), UsePathStyle: true,
		Credentials:                credentials.NewStaticCredentialsProvider(g.Access, g.Secret, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired})
}

// CreateBucket makes a bucket whose objects anyone may GET without
// credentials (a bucket policy granting s3:GetObject to "*"), as a CDN's
// origin is set up; its objects are then at URL/BUCKET/KEY.
func (g *Gateway) CreateBucket(ctx context.Context, name string) error {
	c := g.Client()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name}); err != nil {
		return fmt.Errorf("creating bucket %s: %w", name, err)
	}
	policy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::%s/*"}]}`, name)
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: &name, Policy: &policy}); err != nil {
		return fmt.Errorf("making bucket %s publicly readable: %w", name, err)
	}
	return nil
}

// ForTest starts a gateway for t with a public bucket named bucket, sets
// the AWS environment to reach it (t.Setenv), and stops it when t ends.
// It skips t when versitygw is missing, and fails it when CI is set.
func ForTest(t testing.TB, bucket string) *Gateway {
	t.Helper()
	bin := DefaultBin()
	if err := Missing(bin); err != nil {
		testenv.Need(t, "%v", err)
	}
	g, err := Start(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	for k, v := range g.Env() {
		t.Setenv(k, v)
	}
	if bucket != "" {
		if err := g.CreateBucket(context.Background(), bucket); err != nil {
			t.Fatal(err)
		}
	}
	return g
}
