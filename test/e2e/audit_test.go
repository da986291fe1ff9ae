package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// auditEvent is the part of an audit.k8s.io/v1 Event the trail is read by.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

// auditTrail reads the local cluster's audit log: the events about one
// TrainJob.
func auditTrail(ns, name string) []auditEvent {
	GinkgoHelper()
	f, err := os.Open(filepath.Join(filepath.Dir(clusterKubeconfig()), "logs", "audit.log"))
	Expect(err).NotTo(HaveOccurred(), "the local cluster's API server writes no audit log")
	defer f.Close()
	var out []auditEvent
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		var e auditEvent
		if json.Unmarshal(s.Bytes(), &e) == nil && e.ObjectRef.Resource == "trainjobs" && e.ObjectRef.Namespace == ns && e.ObjectRef.Name == name {
			out = append(out, e)
		}
	}
	return out
}

var _ = Describe("The audit trail", func() {
	It("records who created, changed and deleted a job, and when; describe names who created it", func() {
		ns := newNamespace("audit")
		as := []string{"--as", "alice@example.com", "--as-group", "system:masters"}
		start := time.Now().Add(-time.Second)
		succeed(mpiCmd(append(as, "-n", ns, "run", "audited", "--image", "img", "--runtime", "torus-openmpi-long", "--", "mpirun", "./a")...))
		r := succeed(mpiCmd("-n", ns, "describe", "audited"))
		Expect(r.Stdout).To(MatchRegexp(`Created by:\s+alice@example\.com`))
		Expect(k8sClient.Patch(ctx, trainJobRef(ns, "audited"), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"vision"}}}`)))).To(Succeed())
		review := &authenticationv1.SelfSubjectReview{}
		Expect(k8sClient.Create(ctx, review)).To(Succeed())
		admin := review.Status.UserInfo.Username
		succeed(mpiCmd(append(as, "-n", ns, "delete", "audited")...))

		type step struct{ verb, user string }
		Eventually(func(g Gomega) {
			var got []step
			for _, e := range auditTrail(ns, "audited") {
				g.Expect(e.StageTimestamp).To(BeTemporally(">=", start))
				g.Expect(e.ResponseStatus.Code).To(BeNumerically("<", 300))
				user := e.User.Username
				if e.ImpersonatedUser != nil {
					user = e.ImpersonatedUser.Username
				}
				got = append(got, step{e.Verb, user})
			}
			g.Expect(got).To(ContainElements(
				step{"create", "alice@example.com"},
				step{"patch", admin},
				step{"delete", "alice@example.com"},
			))
		}, 30*time.Second, 500*time.Millisecond).Should(Succeed())
	})
})
