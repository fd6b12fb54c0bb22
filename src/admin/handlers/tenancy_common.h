// What the multi-tenancy route groups share: the one mapping from internal
// error codes to HTTP statuses, and running a handler's blocking body on the
// tenancy thread.
#pragma once

#include <functional>

#include "admin/router.h"
#include "broker/tenancy.h"
#include "common/status.h"

namespace magnetar::admin {

// NotFound 404, AlreadyExists 409, FailedPrecondition 412, InvalidArgument
// 400, PermissionDenied 403, ResourceExhausted 429, Unavailable 503,
// Unimplemented 501, anything else 500.
int http_status(const common::Status& status);
// {"reason": "..."} with the status above.
HttpResponse error_response(const common::Status& status);

// Runs `work` on the tenancy thread and answers with what it returns. Answers
// 503/429 at once when the tenancy thread cannot take it. A JSON exception
// escaping `work` answers 400; any other exception 500.
void run_blocking(broker::Tenancy& tenancy, Responder respond, std::function<HttpResponse()> work);

// 204 when ok, the error otherwise.
HttpResponse empty_or_error(const common::Status& status);

// What a create of a cluster, tenant or namespace with a name that is not
// allowed answers: 412, as Pulsar (PRECONDITION_FAILED "... name is not
// valid"), with the reason.
HttpResponse invalid_name_response(const common::Status& status);

}  // namespace magnetar::admin
