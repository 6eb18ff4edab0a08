// Command webserver is the workload of the test clusters' real nodes
// (`make testbin` packages it as an image, web.tar, so nothing is pulled):
// it answers GET / with where it runs — "hello from POD on NODE", from the
// downward-API variables POD_NAME and NODE_NAME — and GET /healthz with
// 200 for probes, on :8080 (or $PORT), and stops on SIGTERM after the
// requests in flight.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	greeting := fmt.Sprintf("hello from %s on %s\n", os.Getenv("POD_NAME"), os.Getenv("NODE_NAME"))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, greeting) })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Addr: ":" + port, Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			log.Printf("webserver: shutdown: %v", err)
		}
	}()
	log.Printf("webserver: serving on :%s", port)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("webserver: %v", err)
	}
}
