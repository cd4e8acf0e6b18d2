/*
Copyright The banlieue Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

	http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package console

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

// AudiencePrefix starts the audience of the API server's tokens for
// console endpoints, one per Provider (ProviderAudience).
const AudiencePrefix = "banlieue-provider-console/"

// ProviderAudience is the audience of the tokens the API server presents
// to the process serving Provider NAMESPACE/NAME: kube-apiserver accepts
// none for itself, and a process serving another Provider accepts none
// either, so whoever receives one can use it nowhere else.
func ProviderAudience(provider string) string { return AudiencePrefix + provider }

// SelfSigned makes the endpoint's certificate, in memory (a read-only
// root file system is fine), and its digest for Provider.status.console:
// the API server trusts it by that digest, not by a CA.
func SelfSigned(host string) (tls.Certificate, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "banlieue provider console " + host},
		NotBefore:    time.Now().Add(-time.Minute),
		// The process makes a new one each time it starts.
		NotAfter:    time.Now().AddDate(10, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{host},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	sum := sha256.Sum256(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, hex.EncodeToString(sum[:]), nil
}

// TokenReviews authenticates bearer tokens with kube-apiserver's
// TokenReview, for one audience.
func TokenReviews(reviews authenticationv1client.TokenReviewInterface) AuthenticateFunc {
	return func(ctx context.Context, token, audience string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r, err := reviews.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{
			Token: token, Audiences: []string{audience}}}, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("reviewing the token: %w", err)
		}
		if !r.Status.Authenticated {
			if r.Status.Error != "" {
				return "", errors.New(r.Status.Error)
			}
			return "", errors.New("the token is not valid for " + audience)
		}
		return r.Status.User.Username, nil
	}
}
