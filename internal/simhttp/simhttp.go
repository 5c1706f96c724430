// Package simhttp holds what the provider simulators (pkg/provider/stripe/stripesim,
// chargebeesim, githubsim) answer the same way: JSON bodies and the
// /sim/down control endpoint.
package simhttp

import (
	"encoding/json"
	"io"
	"net/http"
)

// WriteJSON answers status with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Down serves POST /sim/down {"down": true|false}: set switches the
// simulator's deliveries off or on.
func Down(set func(bool)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Down bool `json:"down"`
		}
		_ = json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&in)
		set(in.Down)
		WriteJSON(w, http.StatusOK, map[string]bool{"down": in.Down})
	}
}
