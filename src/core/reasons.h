// Reasons: the catalogue of Status reasons (Status::WithReason). A reason
// is a stable snake_case word, finer than the status code, that clients
// read from an error's "reason" field to tell failures of one code apart;
// docs/http_api.md lists what each means. Every reason kvault reports is
// defined here, once, so none is misspelt and none can be renamed by
// accident (tests/core/reasons_test checks the list against the docs).
#ifndef KVAULT_CORE_REASONS_H_
#define KVAULT_CORE_REASONS_H_

#include <array>
#include <string_view>

namespace kvault {

// Request bodies and fields (400).
inline constexpr char kReasonMalformedJson[] = "malformed_json";
inline constexpr char kReasonJsonTooLarge[] = "json_too_large";
inline constexpr char kReasonJsonTooDeep[] = "json_too_deep";
inline constexpr char kReasonMissingField[] = "missing_field";
inline constexpr char kReasonInvalidField[] = "invalid_field";
inline constexpr char kReasonOutOfRange[] = "out_of_range";
inline constexpr char kReasonUnsupportedField[] = "unsupported_field";
inline constexpr char kReasonUnsupportedContent[] = "unsupported_content";
inline constexpr char kReasonImageNotSupported[] = "image_not_supported";
inline constexpr char kReasonEmptyPrompt[] = "empty_prompt";
inline constexpr char kReasonEmptyMessages[] = "empty_messages";
inline constexpr char kReasonInvalidMessages[] = "invalid_messages";
inline constexpr char kReasonUnknownRole[] = "unknown_role";
inline constexpr char kReasonInvalidToken[] = "invalid_token";
inline constexpr char kReasonPromptTooLong[] = "prompt_too_long";
inline constexpr char kReasonInvalidTools[] = "invalid_tools";
inline constexpr char kReasonInvalidGrammar[] = "invalid_grammar";
inline constexpr char kReasonGrammarLimitExceeded[] = "grammar_limit_exceeded";
inline constexpr char kReasonGrammarDeadEnd[] = "grammar_dead_end";
inline constexpr char kReasonInvalidJsonSchema[] = "invalid_json_schema";
inline constexpr char kReasonUnsupportedSchema[] = "unsupported_schema";
inline constexpr char kReasonTemplateError[] = "template_error";
inline constexpr char kReasonInfillUnsupported[] = "infill_unsupported";
inline constexpr char kReasonEmbeddingsUnsupported[] =
    "embeddings_unsupported";
inline constexpr char kReasonInvalidUtf8[] = "invalid_utf8";

// HTTP transport (400, 408, 413, 431, 501, 505; or the connection ends).
inline constexpr char kReasonHeadersTooLarge[] = "headers_too_large";
inline constexpr char kReasonBodyTooLarge[] = "body_too_large";
inline constexpr char kReasonInvalidHeader[] = "invalid_header";
inline constexpr char kReasonMalformedChunk[] = "malformed_chunk";
inline constexpr char kReasonUnsupportedTransferEncoding[] = "unsupported_transfer_encoding";
inline constexpr char kReasonHttpVersionNotSupported[] = "http_version_not_supported";
inline constexpr char kReasonRequestTimeout[] = "request_timeout";
inline constexpr char kReasonWriteTimeout[] = "write_timeout";
inline constexpr char kReasonClientClosed[] = "client_closed";
inline constexpr char kReasonMalformedRequestLine[] = "malformed_request_line";
inline constexpr char kReasonInvalidRequestTarget[] = "invalid_request_target";
inline constexpr char kReasonInvalidHost[] = "invalid_host";
inline constexpr char kReasonInvalidContentLength[] = "invalid_content_length";
inline constexpr char kReasonConflictingContentLength[] = "conflicting_content_length";
inline constexpr char kReasonContentLengthWithChunked[] = "content_length_with_chunked";
inline constexpr char kReasonInvalidTransferEncoding[] = "invalid_transfer_encoding";
inline constexpr char kReasonTooManyConnections[] = "too_many_connections";
inline constexpr char kReasonOutOfDescriptors[] = "out_of_descriptors";

// Slots and their actions.
inline constexpr char kReasonInvalidSlotId[] = "invalid_slot_id";
inline constexpr char kReasonSlotOutOfRange[] = "slot_out_of_range";
inline constexpr char kReasonInvalidAction[] = "invalid_action";
inline constexpr char kReasonInvalidFilename[] = "invalid_filename";
inline constexpr char kReasonSlotSavePathUnset[] = "slot_save_path_unset";
inline constexpr char kReasonSlotEmpty[] = "slot_empty";
inline constexpr char kReasonFileNotFound[] = "file_not_found";
inline constexpr char kReasonNotRegularFile[] = "not_regular_file";
inline constexpr char kReasonNoRoom[] = "no_room";
inline constexpr char kReasonKvFull[] = "kv_full";
inline constexpr char kReasonIoTimeout[] = "io_timeout";
inline constexpr char kReasonIoError[] = "io_error";
inline constexpr char kReasonDiskFull[] = "disk_full";
inline constexpr char kReasonCancelled[] = "cancelled";

// State files: what a restore found wrong with the file.
inline constexpr char kReasonTruncated[] = "truncated";
inline constexpr char kReasonBadMagic[] = "bad_magic";
inline constexpr char kReasonBadHeader[] = "bad_header";
inline constexpr char kReasonBadTrailer[] = "bad_trailer";
inline constexpr char kReasonTrailingBytes[] = "trailing_bytes";
inline constexpr char kReasonChecksumMismatch[] = "checksum_mismatch";
inline constexpr char kReasonVersionUnsupported[] = "version_unsupported";
inline constexpr char kReasonModelMismatch[] = "model_mismatch";
inline constexpr char kReasonLayoutMismatch[] = "layout_mismatch";
inline constexpr char kReasonDtypeMismatch[] = "dtype_mismatch";

// The server's life and its command line.
inline constexpr char kReasonLoading[] = "loading";
inline constexpr char kReasonServerStopping[] = "server_stopping";
inline constexpr char kReasonBindFailed[] = "bind_failed";
inline constexpr char kReasonUnknownFlag[] = "unknown_flag";
inline constexpr char kReasonUnsupportedFlag[] = "unsupported_flag";
inline constexpr char kReasonUnknownChatTemplate[] = "unknown_chat_template";
inline constexpr char kReasonInvalidApiKey[] = "invalid_api_key";
inline constexpr char kReasonNoSuchRoute[] = "no_such_route";
inline constexpr char kReasonMethodNotAllowed[] = "method_not_allowed";
inline constexpr char kReasonNoSlotAvailable[] = "no_slot_available";

// Every reason above, for checks over the catalogue.
inline constexpr std::array<std::string_view, 77> kAllReasons = {
    kReasonMalformedJson,
    kReasonJsonTooLarge,
    kReasonJsonTooDeep,
    kReasonMissingField,
    kReasonInvalidField,
    kReasonOutOfRange,
    kReasonUnsupportedField,
    kReasonUnsupportedContent,
    kReasonImageNotSupported,
    kReasonEmptyPrompt,
    kReasonEmptyMessages,
    kReasonInvalidMessages,
    kReasonUnknownRole,
    kReasonInvalidToken,
    kReasonPromptTooLong,
    kReasonInvalidTools,
    kReasonInvalidGrammar,
    kReasonGrammarLimitExceeded,
    kReasonGrammarDeadEnd,
    kReasonInvalidJsonSchema,
    kReasonUnsupportedSchema,
    kReasonTemplateError,
    kReasonInfillUnsupported,
    kReasonEmbeddingsUnsupported,
    kReasonInvalidUtf8,
    kReasonHeadersTooLarge,
    kReasonBodyTooLarge,
    kReasonInvalidHeader,
    kReasonMalformedChunk,
    kReasonUnsupportedTransferEncoding,
    kReasonHttpVersionNotSupported,
    kReasonRequestTimeout,
    kReasonWriteTimeout,
    kReasonClientClosed,
    kReasonMalformedRequestLine,
    kReasonInvalidRequestTarget,
    kReasonInvalidHost,
    kReasonInvalidContentLength,
    kReasonConflictingContentLength,
    kReasonContentLengthWithChunked,
    kReasonInvalidTransferEncoding,
    kReasonTooManyConnections,
    kReasonOutOfDescriptors,
    kReasonInvalidSlotId,
    kReasonSlotOutOfRange,
    kReasonInvalidAction,
    kReasonInvalidFilename,
    kReasonSlotSavePathUnset,
    kReasonSlotEmpty,
    kReasonFileNotFound,
    kReasonNotRegularFile,
    kReasonNoRoom,
    kReasonKvFull,
    kReasonIoTimeout,
    kReasonIoError,
    kReasonDiskFull,
    kReasonCancelled,
    kReasonTruncated,
    kReasonBadMagic,
    kReasonBadHeader,
    kReasonBadTrailer,
    kReasonTrailingBytes,
    kReasonChecksumMismatch,
    kReasonVersionUnsupported,
    kReasonModelMismatch,
    kReasonLayoutMismatch,
    kReasonDtypeMismatch,
    kReasonLoading,
    kReasonServerStopping,
    kReasonBindFailed,
    kReasonUnknownFlag,
    kReasonUnsupportedFlag,
    kReasonUnknownChatTemplate,
    kReasonInvalidApiKey,
    kReasonNoSuchRoute,
    kReasonMethodNotAllowed,
    kReasonNoSlotAvailable,
};

}  // namespace kvault

#endif  // KVAULT_CORE_REASONS_H_
