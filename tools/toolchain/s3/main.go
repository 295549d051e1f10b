// molt-s3: the lab's S3-compatible object store, for Pulumi's S3 backend and molt's lease.
// gofakes3 (MIT; github.com/johannesboyne/gofakes3) serves the S3 API from memory (its bolt
// backend faults on CopyObject, which the Pulumi backend uses for backups), with conditional
// PutObject (If-None-Match: *, If-Match: <ETag>). The buckets live as long as the process.
// This wrapper adds
// what the lab needs beyond it:
//   - AWS Signature Version 4 checking: a request must be signed with the one key pair read
//     from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (gofakes3 accepts anything). The claimed
//     payload hash is signed, the body is not re-hashed.
//   - conditional DeleteObject (If-Match: <ETag> or *), as S3 has it since 2025; gofakes3
//     ignores the header. Object writes and deletes are serialised here so that the check
//     and the delete are one step.
//   - buckets created at start (-bucket), none on demand: a request for another bucket gets
//     NoSuchBucket, as on S3.
// It listens on loopback only and prints "listening on ADDR" once it serves.
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

type bucketList []string

func (b *bucketList) String() string     { return strings.Join(*b, ",") }
func (b *bucketList) Set(v string) error { *b = append(*b, v); return nil }

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "loopback address to listen on (port 0: any free port)")
	ready := flag.String("ready-file", "", "file to write the bound address to once serving")
	var buckets bucketList
	flag.Var(&buckets, "bucket", "bucket to create at start (repeatable)")
	flag.Parse()

	keyID, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if keyID == "" || secret == "" {
		fmt.Fprintln(os.Stderr, "molt-s3: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (the one key pair it accepts)")
		os.Exit(2)
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		fmt.Fprintf(os.Stderr, "molt-s3: -listen %s: only loopback addresses are served\n", *listen)
		os.Exit(2)
	}

	backend := s3mem.New()
	for _, b := range buckets {
		if err := backend.CreateBucket(b); err != nil && !gofakes3.HasErrorCode(err, gofakes3.ErrBucketAlreadyExists) {
			log.Fatalf("molt-s3: create bucket %s: %v", b, err)
		}
	}
	faker := gofakes3.New(backend, gofakes3.WithAutoBucket(false), gofakes3.WithHostBucket(false),
		gofakes3.WithLogger(gofakes3.DiscardLog()))
	s3 := &server{s3: faker.Server(), backend: backend, keyID: keyID, secret: secret}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("molt-s3: listen %s: %v", *listen, err)
	}
	addr := ln.Addr().String()
	if *ready != "" {
		if err := os.WriteFile(*ready+".tmp", []byte(addr+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(*ready+".tmp", *ready); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("listening on %s\n", addr)
	go func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
		<-ch
		_ = ln.Close()
	}()
	if err := http.Serve(ln, s3); err != nil && !strings.Contains(err.Error(), "use of closed") {
		log.Fatal(err)
	}
}

type server struct {
	s3      http.Handler
	backend gofakes3.Backend
	keyID   string
	secret  string
	writes  sync.Mutex
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if code, msg := s.authenticate(r); code != "" {
		s3Error(w, http.StatusForbidden, code, msg)
		return
	}
	if r.Method == http.MethodPut || r.Method == http.MethodPost || r.Method == http.MethodDelete {
		s.writes.Lock()
		defer s.writes.Unlock()
	}
	if r.Method == http.MethodDelete && r.Header.Get("If-Match") != "" {
		if !s.deleteMatches(w, r) {
			return
		}
	}
	s.s3.ServeHTTP(w, r)
}

// deleteMatches answers a conditional delete whose precondition fails (and returns false),
// or returns true to let the delete through. Called with s.writes held.
func (s *server) deleteMatches(w http.ResponseWriter, r *http.Request) bool {
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 2)
	if len(parts) != 2 || parts[1] == "" {
		return true
	}
	obj, err := s.backend.HeadObject(parts[0], parts[1])
	if err != nil {
		if gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchKey) {
			s3Error(w, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
			return false
		}
		return true // NoSuchBucket and the like: gofakes3 answers them
	}
	want := strings.Trim(r.Header.Get("If-Match"), `"`)
	if want != "*" && want != hex.EncodeToString(obj.Hash) {
		s3Error(w, http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
		return false
	}
	return true
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, msg)
}

// authenticate checks an AWS Signature Version 4 Authorization header against the one key
// pair: it returns an S3 error code, or "" when the signature is right.
func (s *server) authenticate(r *http.Request) (string, string) {
	auth := r.Header.Get("Authorization")
	const algo = "AWS4-HMAC-SHA256 "
	if !strings.HasPrefix(auth, algo) {
		return "AccessDenied", "Only AWS Signature Version 4 signed requests are accepted."
	}
	fields := map[string]string{}
	for _, f := range strings.Split(strings.TrimPrefix(auth, algo), ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(f), "="); ok {
			fields[k] = v
		}
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return "AuthorizationHeaderMalformed", "The Credential of the authorization header is malformed."
	}
	if scope[0] != s.keyID {
		return "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records."
	}
	amzDate := r.Header.Get("X-Amz-Date")
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		payload = "UNSIGNED-PAYLOAD"
	}
	signed := strings.Split(fields["SignedHeaders"], ";")
	var canon strings.Builder
	path, rawQuery, _ := strings.Cut(r.RequestURI, "?")
	canon.WriteString(r.Method + "\n" + path + "\n" + canonicalQuery(rawQuery) + "\n")
	for _, h := range signed {
		var v string
		switch h {
		case "host":
			v = r.Host
		case "content-length":
			v = r.Header.Get("Content-Length")
			if v == "" && r.ContentLength >= 0 {
				v = fmt.Sprint(r.ContentLength)
			}
		case "transfer-encoding":
			v = strings.Join(r.TransferEncoding, ",")
		default:
			vals := r.Header.Values(h)
			for i := range vals {
				vals[i] = strings.Join(strings.Fields(vals[i]), " ")
			}
			v = strings.Join(vals, ",")
		}
		canon.WriteString(h + ":" + v + "\n")
	}
	canon.WriteString("\n" + fields["SignedHeaders"] + "\n" + payload)
	sum := sha256.Sum256([]byte(canon.String()))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + strings.Join(scope[1:], "/") + "\n" + hex.EncodeToString(sum[:])
	key := []byte("AWS4" + s.secret)
	for _, part := range scope[1:] {
		key = hmacSHA256(key, part)
	}
	want := hex.EncodeToString(hmacSHA256(key, toSign))
	if !hmac.Equal([]byte(want), []byte(fields["Signature"])) {
		return "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your key and signing method."
	}
	return "", ""
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// canonicalQuery sorts the query's parameters and encodes them the way SigV4 does.
func canonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	var pairs []string
	for _, p := range strings.Split(raw, "&") {
		k, v, _ := strings.Cut(p, "=")
		dk, err1 := url.QueryUnescape(k)
		dv, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			dk, dv = k, v
		}
		pairs = append(pairs, awsEscape(dk)+"="+awsEscape(dv))
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "&")
}

func awsEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
