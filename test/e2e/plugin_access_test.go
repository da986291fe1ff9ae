package e2e

import (
	"encoding/json"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var _ = Describe("kubectl mpi for a user without permissions", Ordered, func() {
	var ns, token string
	BeforeAll(func() {
		ns = newNamespace("plugin-access")
		succeed(mpiCmd("-n", ns, "run", "pi", "--image", "img", "--runtime", "torus-openmpi-long", "--", "mpirun", "./pi"))
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody", Namespace: ns}}
		Expect(k8sClient.Create(ctx, sa)).To(Succeed())
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrInt64(600)}}
		Expect(k8sClient.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
		token = tr.Status.Token
		Expect(token).NotTo(BeEmpty())
	})

	forbidden := func(verb, resource string) string {
		return fmt.Sprintf(`User "system:serviceaccount:%s:nobody" cannot %s resource %q`, ns, verb, resource)
	}

	It("says what is forbidden, with a token", func() {
		cases := []struct {
			args []string
			want string
		}{
			{[]string{"list"}, forbidden("list", "trainjobs")},
			{[]string{"describe", "pi"}, forbidden("get", "trainjobs")},
			{[]string{"logs", "pi"}, forbidden("get", "trainjobs")},
			{[]string{"wait", "pi"}, forbidden("get", "trainjobs")},
			{[]string{"delete", "pi"}, forbidden("get", "trainjobs")},
			{[]string{"run", "x", "--image", "img", "--runtime", "torus-openmpi-e2e"}, forbidden("get", "clustertrainingruntimes")},
			{[]string{"run", "x", "--image", "img", "--dry-run=server"}, forbidden("get", "clustertrainingruntimes")},
		}
		for _, tc := range cases {
			r := mpiCmd(append([]string{"-n", ns, "--token", token}, tc.args...)...)
			Expect(r.Code).To(Equal(1), "%v", tc.args)
			Expect(r.Stderr).To(ContainSubstring("is forbidden: "+tc.want), "%v", tc.args)
		}
	})

	It("says what is forbidden, impersonated", func() {
		r := mpiCmd("-n", ns, "--as", "system:serviceaccount:"+ns+":nobody", "describe", "pi")
		Expect(r.Code).To(Equal(1))
		Expect(r.Stderr).To(ContainSubstring(`trainjobs.trainer.kubeflow.org "pi" is forbidden: ` + forbidden("get", "trainjobs")))
	})

	It("doctor tells the user what they may not do and still checks the rest", func() {
		r := mpiCmd("-n", ns, "--token", token, "doctor")
		Expect(r.Code).To(Equal(1), "a user who may do nothing fails the permissions check")
		Expect(r.Stdout).To(MatchRegexp(`(?m)^PASS\s+API server\s+Kubernetes v1\.`))
		Expect(r.Stdout).To(MatchRegexp(`(?m)^FAIL\s+Permissions\s+in namespace %s you may not create trainjobs \(kubectl mpi run, rerun\)`, ns))
		Expect(r.Stdout).To(MatchRegexp(`(?m)^WARN\s+Torus webhooks\s+not checked: you may not create TrainJobs in %s`, ns))
		Expect(r.Stdout).To(MatchRegexp(`(?m)^WARN\s+GPUs\s+cannot list nodes`))
	})

	It("doctor passes for an admin on the local cluster", func() {
		installSampleRuntimes()
		r := succeed(mpiCmd("-n", ns, "doctor", "-o", "json"))
		var results []struct{ Check, Status, Message, Fix string }
		Expect(json.Unmarshal([]byte(r.Stdout), &results)).To(Succeed())
		status := map[string]string{}
		for _, res := range results {
			status[res.Check] = res.Status
		}
		for _, check := range []string{"API server", "Trainer CRDs", "JobSet", "Kueue", "Torus operator", "Torus webhooks", "MPI runtimes", "Permissions", "GPUs"} {
			Expect(status).To(HaveKeyWithValue(check, "PASS"), "%s: %s", check, r.Stdout)
		}
		// No LocalQueue in this namespace: a warning with a fix.
		Expect(status).To(HaveKeyWithValue("Kueue queues", "WARN"))
	})
})

func ptrInt64(v int64) *int64 { return &v }
