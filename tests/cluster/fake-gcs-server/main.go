// The Google Cloud Storage emulator of renderpool's durable-job tests: fake-gcs-server's storage
// (its fakestorage package) with one mend. GCS's XML API stores an object sent as a plain
// `PUT /<bucket>/<object>` and answers with its ETag, which is how object_store writes;
// fake-gcs-server takes such a PUT only as a signed-URL upload (refusing it otherwise: "invalid
// uploadType") and answers that without an ETag header. So a PUT of that shape is marked as a
// signed-URL upload before it reaches the emulator (which checks no signature either way), and
// its answer gets the stored object's ETag as a header. Everything else is fake-gcs-server's own.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Uint("port", 4443, "port to listen on")
	root := flag.String("root", "", "folder holding the buckets (required)")
	flag.Parse()
	if *root == "" || *port > 65535 {
		log.Fatal("fake-gcs-server: -root is required and -port must be a port")
	}
	addr := net.JoinHostPort(*host, strconv.FormatUint(uint64(*port), 10))
	server, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		StorageRoot: *root,
		Scheme:      "http",
		Host:        *host,
		Port:        uint16(*port),
		NoListener:  true,
		PublicHost:  addr,
		ExternalURL: "http://" + addr,
	})
	if err != nil {
		log.Fatal(err)
	}
	emulator := server.HTTPHandler()
	mended := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query := r.URL.Query()
		plainPut := r.Method == http.MethodPut &&
			!strings.HasPrefix(r.URL.Path, "/upload/") && !strings.HasPrefix(r.URL.Path, "/storage/") &&
			query.Get("uploadType") == "" && query.Get("X-Goog-Algorithm") == ""
		if !plainPut {
			emulator.ServeHTTP(w, r)
			return
		}
		query.Set("X-Goog-Algorithm", "GOOG4-RSA-SHA256")
		r.URL.RawQuery = query.Encode()
		answer := httptest.NewRecorder()
		emulator.ServeHTTP(answer, r)
		var stored struct {
			Etag string `json:"etag"`
		}
		if answer.Code == http.StatusOK && json.Unmarshal(answer.Body.Bytes(), &stored) == nil && stored.Etag != "" {
			answer.Header().Set("ETag", `"`+stored.Etag+`"`)
		}
		for name, values := range answer.Header() {
			w.Header()[name] = values
		}
		w.WriteHeader(answer.Code)
		_, _ = w.Write(answer.Body.Bytes())
	})
	log.Printf("fake-gcs-server on http://%s, buckets in %s", addr, *root)
	log.Fatal(http.ListenAndServe(addr, mended))
}
