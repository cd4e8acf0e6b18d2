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

package kubectl

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/console"
)

func newWebConsoleCommand(cfg *config, streams Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "webconsole NAME",
		Short: "Print a one-time web console URL of a vSphere VM",
		Long: `Ask virtualmachines/NAME/webconsole for a web console URL (vSphere's WebMKS,
for VMs with no serial console here): a key pair is made in memory, its
public half sent, and the answer, encrypted with it, decrypted and printed
with when it expires. The URL is accepted once; the key is not kept.`,
		Example:           `  kubectl banlieue webconsole web-01 -n prod`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeVMs(cfg),
		RunE: func(cmd *cobra.Command, args []string) error {
			vms, _, err := cfg.vms()
			if err != nil {
				return err
			}
			// 3072 bits: room for a long host name in the URL (RSA-OAEP
			// with SHA-512 carries 256 bytes with it, 126 with 2048).
			key, err := rsa.GenerateKey(rand.Reader, 3072)
			if err != nil {
				return err
			}
			pub := pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&key.PublicKey)})
			got, err := vms.CreateWebConsole(cmd.Context(), args[0], &v1alpha1.VirtualMachineWebConsole{
				Spec: v1alpha1.VirtualMachineWebConsoleSpec{PublicKey: string(pub)}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			u, err := console.DecryptURL(key, got.Status.URL)
			if err != nil {
				return fmt.Errorf("decrypting the web console URL: %w", err)
			}
			fmt.Fprintln(streams.Out, u)
			fmt.Fprintf(streams.ErrOut, "Accepted once, until %s.\n", got.Status.ExpiresAt.UTC().Format(time.RFC3339))
			return nil
		},
	}
}
