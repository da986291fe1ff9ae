package controller

// maxConditionMessage is the API's limit on metav1.Condition messages.
const maxConditionMessage = 32768

func truncate(msg string) string {
	if len(msg) <= maxConditionMessage {
		return msg
	}
	const ellipsis = "..."
	return msg[:maxConditionMessage-len(ellipsis)] + ellipsis
}
