// Package publish copies a log's C2SP tlog-tiles to S3-compatible object
// storage, so that readers (auditors, monitors, witnesses, a CDN in front
// of the bucket) never touch the sequencer.
//
// Objects are the tlog-tiles paths under the bucket's prefix:
// PREFIX/checkpoint, PREFIX/tile/<L>/<N>[.p/<W>] and
// PREFIX/tile/entries/<N>[.p/<W>]. Every tile and entry bundle, full or
// partial, is written once with If-None-Match: * and never overwritten: an
// object that already holds other bytes is an alarm (ErrAlarm). The
// checkpoint is written last, after every tile it commits to, and only
// ever replaced by a larger checkpoint of the same log.
package publish

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Cache-Control of the objects: a tile or entry bundle (full, or partial
// of a given width) never changes; the checkpoint changes with each
// publication and must never be cached.
const (
	TileCacheControl       = "public, max-age=31536000, immutable"
	CheckpointCacheControl = "no-store"
)

// IsURL reports whether s names a bucket (s3://…) rather than a folder or
// an http(s) URL.
func IsURL(s string) bool { return strings.HasPrefix(s, "s3://") }

// Bucket is a prefix in an S3 bucket.
type Bucket struct {
	c              *s3.Client
	bucket, prefix string
}

// ParseURL splits s3://BUCKET[/PREFIX] into the bucket and the prefix
// (without slashes at either end).
func ParseURL(s string) (bucket, prefix string, err error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", "", fmt.Errorf("%q is not a bucket URL: want s3://BUCKET/PREFIX", s)
	}
	prefix = strings.Trim(u.Path, "/")
	for _, seg := range strings.Split(prefix, "/") {
		if prefix != "" && (seg == "" || seg == "." || seg == "..") {
			return "", "", fmt.Errorf("%q: the prefix %q has an empty, . or .. segment", s, prefix)
		}
	}
	return u.Host, prefix, nil
}

// Open returns the bucket prefix named by an s3://BUCKET/PREFIX URL,
// configured the AWS SDK's standard way: credentials and region from
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_PROFILE and
// the shared config files; an S3-compatible store's endpoint from
// AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, addressed path-style
// (ENDPOINT/BUCKET/KEY), which every S3-compatible store serves. With a
// custom endpoint and no region configured, the region is us-east-1.
func Open(ctx context.Context, s3url string) (*Bucket, error) {
	bucket, prefix, err := ParseURL(s3url)
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: loading the AWS configuration: %w", s3url, err)
	}
	endpoint := os.Getenv("AWS_ENDPOINT_URL_S3")
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	if endpoint == "" && cfg.BaseEndpoint != nil {
		endpoint = *cfg.BaseEndpoint
	}
	if endpoint != "" && cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("%s: no AWS region: set AWS_REGION (or a region in ~/.aws/config), or AWS_ENDPOINT_URL_S3 for an S3-compatible store", s3url)
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.UsePathStyle = true
		}
		// Checksums only where S3 requires them: many S3-compatible stores
		// do not take the SDK's default CRC trailers. Each PUT is signed
		// over its body's SHA-256 all the same.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &Bucket{c: c, bucket: bucket, prefix: prefix}, nil
}

// Client is the bucket's S3 client.
func (b *Bucket) Client() *s3.Client { return b.c }

// Name is the bucket's name; Prefix the prefix (possibly empty).
func (b *Bucket) Name() string   { return b.bucket }
func (b *Bucket) Prefix() string { return b.prefix }

// String is the bucket's s3:// URL.
func (b *Bucket) String() string {
	if b.prefix == "" {
		return "s3://" + b.bucket
	}
	return "s3://" + b.bucket + "/" + b.prefix
}

// Key is the object key of a tlog-tiles path.
func (b *Bucket) Key(path string) string {
	if b.prefix == "" {
		return path
	}
	return b.prefix + "/" + path
}

// Get reads an object; a missing one is an error wrapping fs.ErrNotExist.
// It returns the object's ETag too.
func (b *Bucket) Get(ctx context.Context, path string) ([]byte, string, error) {
	out, err := b.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: aws.String(b.Key(path))})
	if err != nil {
		if status(err) == http.StatusNotFound {
			return nil, "", fmt.Errorf("%s/%s: %w", b, path, fs.ErrNotExist)
		}
		return nil, "", fmt.Errorf("reading %s/%s: %w", b, path, err)
	}
	defer out.Body.Close()
	// No object of the layout is larger than a full entry bundle of
	// maximum-size leaves (about 16 MiB).
	data, err := io.ReadAll(io.LimitReader(out.Body, 1<<25))
	if err != nil {
		return nil, "", fmt.Errorf("reading %s/%s: %w", b, path, err)
	}
	return data, aws.ToString(out.ETag), nil
}

// ErrAlarm is returned (wrapped) when the bucket holds an object of the
// layout with other bytes than the log's: someone else wrote it, or the
// bucket holds another log. It is never overwritten.
var ErrAlarm = errors.New("publish: ALARM: the bucket holds other bytes than the log's")

// putOnce writes an immutable object with If-None-Match: *. If the object
// exists, it is read back: the same bytes (an earlier, interrupted
// publication wrote it) are fine, other bytes are ErrAlarm. It reports
// whether it created the object.
func (b *Bucket) putOnce(ctx context.Context, path string, data []byte) (bool, error) {
	_, err := b.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b.bucket, Key: aws.String(b.Key(path)),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		ContentType: aws.String("application/octet-stream"), CacheControl: aws.String(TileCacheControl),
		IfNoneMatch: aws.String("*")})
	if err == nil {
		return true, nil
	}
	if st := status(err); st != http.StatusPreconditionFailed && st != http.StatusConflict {
		return false, fmt.Errorf("writing %s/%s: %w", b, path, err)
	}
	old, _, gerr := b.Get(ctx, path)
	if gerr != nil {
		return false, fmt.Errorf("writing %s/%s: it exists, and reading it back failed: %w", b, path, gerr)
	}
	if !bytes.Equal(old, data) {
		return false, fmt.Errorf("%w: %s/%s holds %d bytes that are not the log's %d; left as it is", ErrAlarm, b, path, len(old), len(data))
	}
	return false, nil
}

// putCheckpoint writes the checkpoint: with If-None-Match: * when the
// bucket has none (etag ""), else with If-Match: etag, so that two
// publishers racing never replace a checkpoint the other wrote after it
// was read. ErrRaced when the condition failed.
func (b *Bucket) putCheckpoint(ctx context.Context, data []byte, etag string) error {
	in := &s3.PutObjectInput{Bucket: &b.bucket, Key: aws.String(b.Key(CheckpointPath)),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		ContentType: aws.String("text/plain; charset=utf-8"), CacheControl: aws.String(CheckpointCacheControl)}
	if etag == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(etag)
	}
	_, err := b.c.PutObject(ctx, in)
	if err == nil {
		return nil
	}
	if st := status(err); st == http.StatusPreconditionFailed || st == http.StatusConflict {
		return fmt.Errorf("writing %s/%s: %w", b, CheckpointPath, errRaced)
	}
	return fmt.Errorf("writing %s/%s: %w", b, CheckpointPath, err)
}

var errRaced = errors.New("the checkpoint changed since it was read (another publisher?)")

// CheckpointPath is the checkpoint's tlog-tiles path.
const CheckpointPath = "checkpoint"

// status returns the HTTP status of an S3 error, or 0.
func status(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return http.StatusNotFound
		case "PreconditionFailed":
			return http.StatusPreconditionFailed
		case "ConditionalRequestConflict":
			return http.StatusConflict
		}
	}
	return 0
}
