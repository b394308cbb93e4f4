//! How a chat encodes what a person decided.

/// Where approval answers go in the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApprovalForm {
    /// On the tool part itself (`approval.approved`, `state: approval-responded`):
    /// the AI SDK v6 form, understood by `toolgate serve` and stock AI SDK servers.
    #[default]
    ResponsePart,
    /// As `tool-approval` parts of a user message after the assistant
    /// message (seed 004's chat-message form). Cannot carry edits.
    UserMessage,
}

/// How an approval with edited input is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EditForm {
    /// `approval.editedInput` beside the model's original input: toolgate's
    /// extension, which keeps the original call in the history and verifies the edit.
    #[default]
    EditedInput,
    /// The tool part's `input` replaced by the edit: for stock AI SDK servers,
    /// which execute whatever input the approved part carries (and have no
    /// notion of edits). A signing server rejects this form.
    ReplaceInput,
}

/// Options of a [`crate::Chat`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChatOptions {
    /// Where approval answers go.
    pub approval_form: ApprovalForm,
    /// How edits are sent.
    pub edit_form: EditForm,
}
